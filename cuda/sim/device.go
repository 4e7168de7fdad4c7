package sim

/*
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/goddp/goddp/tensor"
)

// ErrClosed is returned for work on a closed device or a freed buffer.
var ErrClosed = errors.New("sim: device closed")

// Device is one simulated GPU: memory in host RAM (C heap, so that a
// device pointer stays valid and fixed as a CUdeviceptr does), a compute
// stream, and any number of further streams. Safe for concurrent use.
type Device struct {
	ordinal int
	compute *Stream

	mu      sync.Mutex
	streams []*Stream
	closed  bool
	tensors tensor.Device // Tensors' device, made on first use
}

// New returns simulated device ordinal ("sim:ordinal") with its compute
// stream running.
func New(ordinal int) *Device {
	d := &Device{ordinal: ordinal}
	d.compute = d.NewStream("compute")
	return d
}

func (d *Device) String() string { return fmt.Sprintf("sim:%d", d.ordinal) }

// Ordinal is the device's index.
func (d *Device) Ordinal() int { return d.ordinal }

// Compute is the device's compute stream, where ops run by default.
func (d *Device) Compute() *Stream { return d.compute }

// NewStream returns a new stream, concurrent with the others (a
// non-blocking CUDA stream); name appears in errors.
func (d *Device) NewStream(name string) *Stream {
	s := newStream(d, name)
	d.mu.Lock()
	d.streams = append(d.streams, s)
	d.mu.Unlock()
	return s
}

// Synchronize waits for every stream of the device and returns the first
// sticky error.
func (d *Device) Synchronize() error {
	d.mu.Lock()
	ss := append([]*Stream(nil), d.streams...)
	d.mu.Unlock()
	var first error
	for _, s := range ss {
		if err := s.Synchronize(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close drains and stops every stream. Buffers must be freed by their owners.
func (d *Device) Close() error {
	err := d.Synchronize()
	d.mu.Lock()
	ss := d.streams
	d.streams, d.closed = nil, true
	d.mu.Unlock()
	for _, s := range ss {
		s.close()
	}
	return err
}

// Buffer is device memory: bytes in host RAM addressed by Ptr, as a
// CUdeviceptr. Its contents are read and written by stream work; the host
// views (F32, F64, Bytes) are for after a Synchronize, as cuMemcpyDtoH.
type Buffer struct {
	dev   *Device
	p     unsafe.Pointer
	bytes int
}

// Alloc returns bytes of zeroed device memory.
func (d *Device) Alloc(bytes int) (*Buffer, error) {
	if bytes < 0 {
		return nil, fmt.Errorf("sim: alloc of %d bytes on %v", bytes, d)
	}
	n := bytes
	if n == 0 {
		n = 1
	}
	p := C.calloc(C.size_t(n), 1)
	if p == nil {
		return nil, fmt.Errorf("sim: out of memory allocating %d bytes on %v", bytes, d)
	}
	return &Buffer{dev: d, p: p, bytes: bytes}, nil
}

// Free releases the memory. Work still queued on it must have finished.
func (b *Buffer) Free() {
	if b.p != nil {
		C.free(b.p)
		b.p = nil
	}
}

// Len is the buffer's size in bytes.
func (b *Buffer) Len() int { return b.bytes }

// Ptr is the device address, as kernels and collectives receive it.
func (b *Buffer) Ptr() uint64 { return uint64(uintptr(b.p)) }

// Device is where the buffer lives.
func (b *Buffer) Device() *Device { return b.dev }

// Bytes is the host's view of the memory (valid after a Synchronize).
func (b *Buffer) Bytes() []byte { return unsafe.Slice((*byte)(b.p), b.bytes) }

// F32 views the memory as float32s.
func (b *Buffer) F32() []float32 { return unsafe.Slice((*float32)(b.p), b.bytes/4) }

// F64 views the memory as float64s.
func (b *Buffer) F64() []float64 { return unsafe.Slice((*float64)(b.p), b.bytes/8) }

func (b *Buffer) check(off, n int, what string) error {
	if b.p == nil {
		return fmt.Errorf("%s: %w (buffer freed)", what, ErrClosed)
	}
	if off < 0 || n < 0 || off+n > b.bytes {
		return fmt.Errorf("sim: %s of bytes [%d, %d) outside a %d-byte buffer", what, off, off+n, b.bytes)
	}
	return nil
}

// CopyHtoD enqueues a copy of src into dst at byte offset off. src must
// stay unchanged until the stream has run the copy (as pinned memory for
// cuMemcpyHtoDAsync).
func (s *Stream) CopyHtoD(dst *Buffer, off int, src []byte) {
	s.Enqueue("copy host to device", func() error {
		if err := dst.check(off, len(src), "copy host to device"); err != nil {
			return err
		}
		copy(dst.Bytes()[off:], src)
		return nil
	})
}

// CopyDtoH enqueues a copy of src's bytes [off, off+len(dst)) into dst,
// which the host may read once the stream has run it.
func (s *Stream) CopyDtoH(dst []byte, src *Buffer, off int) {
	s.Enqueue("copy device to host", func() error {
		if err := src.check(off, len(dst), "copy device to host"); err != nil {
			return err
		}
		copy(dst, src.Bytes()[off:])
		return nil
	})
}

// CopyDtoD enqueues a copy of n bytes from src at srcOff to dst at dstOff.
func (s *Stream) CopyDtoD(dst *Buffer, dstOff int, src *Buffer, srcOff, n int) {
	s.Enqueue("copy device to device", func() error {
		if err := dst.check(dstOff, n, "copy device to device"); err != nil {
			return err
		}
		if err := src.check(srcOff, n, "copy device to device"); err != nil {
			return err
		}
		copy(dst.Bytes()[dstOff:dstOff+n], src.Bytes()[srcOff:srcOff+n])
		return nil
	})
}

// Memset0 enqueues zeroing n bytes of b from off.
func (s *Stream) Memset0(b *Buffer, off, n int) {
	s.Enqueue("memset", func() error {
		if err := b.check(off, n, "memset"); err != nil {
			return err
		}
		clear(b.Bytes()[off : off+n])
		return nil
	})
}
