// Package mmapfile maps a file read-only into memory and views its bytes as
// little-endian uint16s without copying. It holds the one unsafe
// conversion the token datasets need, with a copying twin for hosts where
// the view would be wrong (big-endian) or impossible (odd address).
//
// On Linux and macOS the file is mapped with mmap(PROT_READ, MAP_SHARED):
// the kernel pages it in on demand and shares the pages between the
// processes (the ranks) that map the same file, so a 10 GB corpus costs no
// heap and one copy of page cache per machine. Elsewhere Open reads the
// file into memory.
package mmapfile

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"
)

// File is a read-only mapping of a whole file.
type File struct {
	data   []byte
	mapped bool // data came from mmap and must be unmapped
}

// Open maps path. The descriptor is closed before returning; the mapping
// lives until Close. An empty file gives an empty File (mmap refuses zero
// lengths).
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return &File{}, nil
	}
	if size != int64(int(size)) {
		return nil, fmt.Errorf("%s: %d bytes do not fit in this process's address space", path, size)
	}
	return mapFile(fh, int(size))
}

// Bytes is the file's contents, valid until Close. Writing to it faults.
func (f *File) Bytes() []byte { return f.data }

// Close unmaps the file. Slices from Bytes or Uint16s must not be used
// afterwards. Closing twice is a no-op.
func (f *File) Close() error {
	data, mapped := f.data, f.mapped
	f.data, f.mapped = nil, false
	if mapped && len(data) > 0 {
		return unmap(data)
	}
	return nil
}

// littleEndian is whether this host stores uint16 little-endian, so that a
// file's little-endian bytes can be viewed in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Uint16s returns b (whose length must be even) as little-endian uint16s:
// a view sharing b's memory on a little-endian host when b is 2-byte
// aligned (always, for a mapping at an even offset), a decoded copy
// otherwise.
func Uint16s(b []byte) []uint16 {
	n := len(b) / 2
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}
