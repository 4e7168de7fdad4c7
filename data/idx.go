package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"goddp/tensor"
)

// IDX element type codes (the MNIST file format).
const (
	idxUint8   = 0x08
	idxInt8    = 0x09
	idxInt16   = 0x0B
	idxInt32   = 0x0C
	idxFloat32 = 0x0D
	idxFloat64 = 0x0E
)

// ReadIDX reads an IDX file (the MNIST format: two zero bytes, a type code,
// the number of dimensions, big-endian uint32 dimensions, then big-endian
// data). A gzipped file (as MNIST is distributed, *.gz) is detected by its
// magic bytes and decompressed.
func ReadIDX(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: read IDX: %w", err)
	}
	defer f.Close()
	return DecodeIDX(f, path)
}

// DecodeIDX reads IDX data from r; name labels errors. Byte offsets in errors
// count from the start of the (decompressed) IDX stream.
func DecodeIDX(r io.Reader, name string) (*Array, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("data: read IDX %s: %w", name, err)
	}
	if len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip header: %w", ErrFormat, name, err)
		}
		raw, err = io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip stream: %w", ErrFormat, name, err)
		}
	}
	return parseIDX(raw, name)
}

// parseIDX decodes the IDX bytes b, which become the Array's: uint8 data
// aliases them.
func parseIDX(b []byte, name string) (*Array, error) {
	bad := func(off int, format string, args ...any) error {
		return fmt.Errorf("%w: %s: byte %d: %s", ErrFormat, name, off, fmt.Sprintf(format, args...))
	}
	if len(b) < 4 {
		return nil, bad(len(b), "file too short for the 4-byte IDX magic (%d bytes)", len(b))
	}
	if b[0] != 0 || b[1] != 0 {
		return nil, bad(0, "bad IDX magic % x (want 00 00 <type> <ndim>)", b[:4])
	}
	code, ndim := b[2], int(b[3])
	var size int
	switch code {
	case idxUint8, idxInt8:
		size = 1
	case idxInt16:
		size = 2
	case idxInt32, idxFloat32:
		size = 4
	case idxFloat64:
		size = 8
	default:
		return nil, bad(2, "unknown IDX type code 0x%02x", code)
	}
	if ndim == 0 {
		return nil, bad(3, "IDX file with 0 dimensions")
	}
	hdr := 4 + 4*ndim
	if len(b) < hdr {
		return nil, bad(len(b), "file ends inside the dimensions (%d dimensions need %d header bytes)", ndim, hdr)
	}
	shape := make([]int, ndim)
	for i := range shape {
		shape[i] = int(binary.BigEndian.Uint32(b[4+4*i:]))
	}
	body := b[hdr:]
	n, ok := checkedElems(shape, len(body)/size)
	if !ok || n*size != len(body) {
		if ok && n*size < len(body) {
			return nil, bad(hdr+n*size, "%d trailing bytes after the %v data", len(body)-n*size, shape)
		}
		return nil, bad(len(b), "file truncated: shape %v of %d-byte elements needs more than the %d data bytes present", shape, size, len(body))
	}
	a := &Array{Shape: shape}
	switch code {
	case idxUint8:
		// b is DecodeIDX's own buffer: alias it rather than copy (the 47 MB
		// of MNIST's training images would otherwise exist twice while loading).
		a.Data = body[:n:n]
	case idxInt8:
		d := make([]int8, n)
		for i := range d {
			d[i] = int8(body[i])
		}
		a.Data = d
	case idxInt16:
		d := make([]int16, n)
		for i := range d {
			d[i] = int16(binary.BigEndian.Uint16(body[2*i:]))
		}
		a.Data = d
	case idxInt32:
		d := make([]int32, n)
		for i := range d {
			d[i] = int32(binary.BigEndian.Uint32(body[4*i:]))
		}
		a.Data = d
	case idxFloat32:
		d := make([]float32, n)
		for i := range d {
			d[i] = math.Float32frombits(binary.BigEndian.Uint32(body[4*i:]))
		}
		a.Data = d
	case idxFloat64:
		d := make([]float64, n)
		for i := range d {
			d[i] = math.Float64frombits(binary.BigEndian.Uint64(body[8*i:]))
		}
		a.Data = d
	}
	return a, nil
}

// WriteIDX writes a in the IDX format (uncompressed). Int64 arrays have no
// IDX type code and are rejected.
func WriteIDX(w io.Writer, a *Array) error {
	var code byte
	var body []byte
	switch d := a.Data.(type) {
	case []uint8:
		code, body = idxUint8, d
	case []int8:
		code, body = idxInt8, make([]byte, len(d))
		for i, v := range d {
			body[i] = byte(v)
		}
	case []int16:
		code, body = idxInt16, make([]byte, 2*len(d))
		for i, v := range d {
			binary.BigEndian.PutUint16(body[2*i:], uint16(v))
		}
	case []int32:
		code, body = idxInt32, make([]byte, 4*len(d))
		for i, v := range d {
			binary.BigEndian.PutUint32(body[4*i:], uint32(v))
		}
	case []float32:
		code, body = idxFloat32, make([]byte, 4*len(d))
		for i, v := range d {
			binary.BigEndian.PutUint32(body[4*i:], math.Float32bits(v))
		}
	case []float64:
		code, body = idxFloat64, make([]byte, 8*len(d))
		for i, v := range d {
			binary.BigEndian.PutUint64(body[8*i:], math.Float64bits(v))
		}
	default:
		return fmt.Errorf("%w: IDX has no type code for %s", ErrConfig, a.DType())
	}
	if len(a.Shape) == 0 || len(a.Shape) > 255 {
		return fmt.Errorf("%w: IDX needs 1 to 255 dimensions, got shape %v", ErrShape, a.Shape)
	}
	if n, ok := checkedElems(a.Shape, math.MaxInt32); !ok || n != a.Len() {
		return fmt.Errorf("%w: shape %v does not hold %d elements", ErrShape, a.Shape, a.Len())
	}
	hdr := make([]byte, 4+4*len(a.Shape))
	hdr[2], hdr[3] = code, byte(len(a.Shape))
	for i, d := range a.Shape {
		binary.BigEndian.PutUint32(hdr[4+4*i:], uint32(d))
	}
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("data: write IDX: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("data: write IDX: %w", err)
	}
	return nil
}

// LoadMNIST reads an MNIST-style pair of IDX files (images [N, rows, cols]
// uint8 and labels [N] uint8, either possibly gzipped) into a classification
// dataset whose inputs are float32 [N, rows*cols] scaled to [0, 1], as
// torchvision's ToTensor followed by flattening.
func LoadMNIST(imagesPath, labelsPath string) (*TensorDataset, error) {
	img, err := ReadIDX(imagesPath)
	if err != nil {
		return nil, err
	}
	lab, err := ReadIDX(labelsPath)
	if err != nil {
		return nil, err
	}
	if len(img.Shape) < 2 {
		return nil, fmt.Errorf("%w: %s: images have shape %v, want [N, ...]", ErrShape, imagesPath, img.Shape)
	}
	if len(lab.Shape) != 1 || lab.Shape[0] != img.Shape[0] {
		return nil, fmt.Errorf("%w: %s has shape %v, %s has %d images", ErrShape, labelsPath, lab.Shape, imagesPath, img.Shape[0])
	}
	x := img.Float32()
	if _, isF := img.Data.([]float32); isF {
		x = append([]float32(nil), x...)
	}
	if _, isU8 := img.Data.([]uint8); isU8 {
		for i := range x {
			x[i] /= 255
		}
	}
	n := img.Shape[0]
	row := 1
	for _, d := range img.Shape[1:] {
		row *= d
	}
	return NewLabeledDataset(tensor.FromF32(x, n, row), lab.Ints())
}
