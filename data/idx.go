package data

import (
	"bufio"
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
//
// A gzipped stream is inflated only as far as its IDX header declares, and
// one that holds more is rejected after a bounded look past that end, so a
// small file that inflates to gigabytes (a gzip bomb) costs neither the
// memory nor the time to inflate it.
func DecodeIDX(r io.Reader, name string) (*Array, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip header: %w", ErrFormat, name, err)
		}
		return decodeIDXStream(zr, name)
	}
	raw, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("data: read IDX %s: %w", name, err)
	}
	return parseIDX(raw, name)
}

// trailingProbe is how far past the declared end a gzipped IDX stream is
// inflated to report its trailing bytes.
const trailingProbe = 64 << 10

// decodeIDXStream reads an IDX stream whose length is not known in advance
// (a decompressor): the header, then exactly the bytes it declares, growing
// the buffer only as data arrives, then checks that the stream ends there.
func decodeIDXStream(zr io.Reader, name string) (*Array, error) {
	gzErr := func(err error) error { return fmt.Errorf("%w: %s: gzip stream: %w", ErrFormat, name, err) }
	var buf bytes.Buffer
	// The header: parseIDX reports a short or malformed one.
	if _, err := io.CopyN(&buf, zr, 4); err != nil && err != io.EOF {
		return nil, gzErr(err)
	}
	if buf.Len() == 4 {
		if _, err := io.CopyN(&buf, zr, 4*int64(buf.Bytes()[3])); err != nil && err != io.EOF {
			return nil, gzErr(err)
		}
	}
	hdr := buf.Bytes()
	size, ok := idxElemSize(hdr)
	if !ok || len(hdr) < 4 || hdr[3] == 0 || len(hdr) < 4+4*int(hdr[3]) {
		return parseIDX(hdr, name)
	}
	shape := idxShape(hdr)
	n, ok := checkedElems(shape, math.MaxInt/size-len(hdr))
	if !ok {
		return nil, fmt.Errorf("%w: %s: byte 4: shape %v of %d-byte elements is larger than memory can hold", ErrFormat, name, shape, size)
	}
	if _, err := io.CopyN(&buf, zr, int64(n*size)); err != nil && err != io.EOF {
		return nil, gzErr(err)
	}
	// Reading on to the end also verifies the gzip checksum.
	extra, err := io.CopyN(io.Discard, zr, trailingProbe)
	if err != nil && err != io.EOF {
		return nil, gzErr(err)
	}
	if extra > 0 {
		more := ""
		if extra == trailingProbe {
			more = "at least "
		}
		return nil, fmt.Errorf("%w: %s: byte %d: %s%d trailing bytes after the %v data the header declares",
			ErrFormat, name, buf.Len(), more, extra, shape)
	}
	return parseIDX(buf.Bytes(), name)
}

// idxElemSize is the element size of the type code in hdr[2].
func idxElemSize(hdr []byte) (int, bool) {
	if len(hdr) < 3 {
		return 0, false
	}
	switch hdr[2] {
	case idxUint8, idxInt8:
		return 1, true
	case idxInt16:
		return 2, true
	case idxInt32, idxFloat32:
		return 4, true
	case idxFloat64:
		return 8, true
	}
	return 0, false
}

// idxShape reads the hdr[3] big-endian dimensions of a complete header.
func idxShape(hdr []byte) []int {
	shape := make([]int, hdr[3])
	for i := range shape {
		shape[i] = int(binary.BigEndian.Uint32(hdr[4+4*i:]))
	}
	return shape
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
	size, ok := idxElemSize(b)
	if !ok {
		return nil, bad(2, "unknown IDX type code 0x%02x", code)
	}
	if ndim == 0 {
		return nil, bad(3, "IDX file with 0 dimensions")
	}
	hdr := 4 + 4*ndim
	if len(b) < hdr {
		return nil, bad(len(b), "file ends inside the dimensions (%d dimensions need %d header bytes)", ndim, hdr)
	}
	shape := idxShape(b)
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
