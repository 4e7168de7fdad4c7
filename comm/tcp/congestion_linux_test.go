package tcp

import (
	"bytes"
	"net"
	"syscall"
	"testing"
	"unsafe"
)

func tcpCongestionOf(t *testing.T, c net.Conn) string {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var buf [16]byte
	n := uint32(len(buf))
	var errno syscall.Errno
	rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_CONGESTION,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	})
	if errno != 0 {
		t.Fatal(errno)
	}
	name, _, _ := bytes.Cut(buf[:n], []byte{0})
	return string(name)
}
