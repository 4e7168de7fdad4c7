package tcp

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCongestionFor(t *testing.T) {
	pipe := func(local, remote string) net.Conn {
		return fakeAddrConn{l: &net.TCPAddr{IP: net.ParseIP(local), Port: 1}, r: &net.TCPAddr{IP: net.ParseIP(remote), Port: 2}}
	}
	for _, tc := range []struct {
		setting, local, remote, want string
	}{
		{"", "127.0.0.1", "127.0.0.1", "reno"},
		{"auto", "::1", "::1", "reno"},
		{"auto", "10.0.0.1", "10.0.0.1", "reno"}, // same host, non-loopback address
		{"auto", "10.0.0.1", "10.0.0.2", ""},     // another host: the admin's choice
		{"system", "127.0.0.1", "127.0.0.1", ""},
		{"cubic", "10.0.0.1", "10.0.0.2", "cubic"},
	} {
		assert.Equal(t, tc.want, congestionFor(tc.setting, pipe(tc.local, tc.remote)), "%+v", tc)
	}
}

// TestLoopbackPeerGetsReno checks on a real loopback connection that the
// option is applied (reno is always allowed).
func TestLoopbackPeerGetsReno(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if !assert.NoError(t, err) {
		return
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if !assert.NoError(t, err) {
		return
	}
	defer c.Close()
	if s := <-done; s != nil {
		defer s.Close()
	}
	setSocketOptions(c, 0, "auto")
	assert.Equal(t, "reno", tcpCongestionOf(t, c))
}

type fakeAddrConn struct {
	net.Conn
	l, r net.Addr
}

func (f fakeAddrConn) LocalAddr() net.Addr  { return f.l }
func (f fakeAddrConn) RemoteAddr() net.Addr { return f.r }
