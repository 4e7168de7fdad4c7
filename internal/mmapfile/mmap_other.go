//go:build !(linux || darwin)

package mmapfile

import (
	"io"
	"os"
)

// mapFile reads the file: this platform gets no mmap from package syscall.
func mapFile(fh *os.File, size int) (*File, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, err
	}
	return &File{data: data}, nil
}

func unmap([]byte) error { return nil }
