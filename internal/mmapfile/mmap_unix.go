//go:build linux || darwin

package mmapfile

import (
	"fmt"
	"os"
	"syscall"
)

func mapFile(fh *os.File, size int) (*File, error) {
	data, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", fh.Name(), err)
	}
	return &File{data: data, mapped: true}, nil
}

func unmap(data []byte) error { return syscall.Munmap(data) }
