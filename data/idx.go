package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/goddp/goddp/tensor"
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

// DefaultIDXMaxBytes is the largest data section (elements × element size)
// an IDX header may declare unless IDXMaxBytes says otherwise. It holds
// EMNIST's largest split (547 MB) with room to spare, and keeps a hostile
// header from reserving more memory than a laptop has.
const DefaultIDXMaxBytes = 2 << 30

// IDXOption configures ReadIDX, DecodeIDX and LoadMNIST.
type IDXOption func(*idxConfig)

type idxConfig struct{ maxBytes int64 }

// IDXMaxBytes caps the data size an IDX header may declare (default
// DefaultIDXMaxBytes). A larger declaration is refused, naming the file, the
// declared size and the cap, before anything is allocated. n must be positive.
func IDXMaxBytes(n int64) IDXOption { return func(c *idxConfig) { c.maxBytes = n } }

// ReadIDX reads an IDX file (the MNIST format: two zero bytes, a type code,
// the number of dimensions, big-endian uint32 dimensions, then big-endian
// data). A gzipped file (as MNIST is distributed, *.gz) is detected by its
// magic bytes and decompressed.
func ReadIDX(path string, opts ...IDXOption) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: read IDX: %w", err)
	}
	defer f.Close()
	return DecodeIDX(f, path, opts...)
}

// DecodeIDX reads IDX data from r; name labels errors. Byte offsets in errors
// count from the start of the (decompressed) IDX stream.
//
// The data is read straight into the returned array, a 64 KiB chunk at a
// time, so decoding holds the declared size plus a small constant whatever
// the element type. The declared size is checked against the cap
// (IDXMaxBytes) and, when r's length is known (a file, a bytes.Reader),
// against the bytes present, before anything is allocated. A gzipped stream
// is inflated only as far as its header declares, and one that holds more is
// rejected after a bounded look past that end, so a small file that inflates
// to gigabytes (a gzip bomb) costs neither the memory nor the time to
// inflate it.
func DecodeIDX(r io.Reader, name string, opts ...IDXOption) (*Array, error) {
	cfg := idxConfig{maxBytes: DefaultIDXMaxBytes}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxBytes <= 0 {
		return nil, fmt.Errorf("%w: IDXMaxBytes must be positive, got %d", ErrConfig, cfg.maxBytes)
	}
	avail, known := remainingBytes(r)
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip header: %w", ErrFormat, name, err)
		}
		return decodeIDXStream(idxSource{r: zr, name: name, avail: -1, maxBytes: cfg.maxBytes,
			readErr: func(err error) error { return fmt.Errorf("%w: %s: gzip stream: %w", ErrFormat, name, err) }})
	}
	if !known {
		avail = -1
	}
	return decodeIDXStream(idxSource{r: br, name: name, avail: avail, maxBytes: cfg.maxBytes,
		readErr: func(err error) error { return fmt.Errorf("data: read IDX %s: %w", name, err) }})
}

// remainingBytes is how many bytes r has left, when r can tell.
func remainingBytes(r io.Reader) (int64, bool) {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len()), true
	case *os.File:
		st, err := v.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return 0, false
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, false
		}
		return st.Size() - off, true
	}
	return 0, false
}

// idxSource is one IDX stream being decoded.
type idxSource struct {
	r        io.Reader
	name     string
	avail    int64 // bytes in r at the start, or -1 when unknown (a decompressor, a pipe)
	maxBytes int64
	readErr  func(error) error // wraps an error of r itself
}

// trailingProbe is how far past the declared end an IDX stream is read to
// report its trailing bytes.
const trailingProbe = 64 << 10

// idxChunk is the staging buffer typed data is converted through; a
// multiple of every element size.
const idxChunk = 64 << 10

// decodeIDXStream reads the header, then exactly the data it declares into
// the array, then checks that the stream ends there.
func decodeIDXStream(s idxSource) (*Array, error) {
	bad := func(off int, format string, args ...any) error {
		return fmt.Errorf("%w: %s: byte %d: %s", ErrFormat, s.name, off, fmt.Sprintf(format, args...))
	}
	var hb [4 + 4*255]byte
	got, err := io.ReadFull(s.r, hb[:4])
	if err == nil {
		var more int
		more, err = io.ReadFull(s.r, hb[4:4+4*int(hb[3])])
		got += more
	}
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, s.readErr(err)
	}
	hdr := hb[:got]
	code, shape, err := parseIDXHeader(hdr, s.name)
	if err != nil {
		return nil, err
	}
	size, _ := idxElemSize(hdr)
	if s.avail >= 0 {
		present := int(s.avail) - len(hdr)
		if _, ok := checkedElems(shape, present/size); !ok {
			return nil, bad(int(s.avail), "file truncated: shape %v of %d-byte elements needs more than the %d data bytes present", shape, size, present)
		}
	}
	n, ok := checkedElems(shape, math.MaxInt/size-len(hdr))
	if !ok {
		return nil, bad(4, "shape %v of %d-byte elements is larger than memory can hold", shape, size)
	}
	if declared := int64(n) * int64(size); declared > s.maxBytes {
		return nil, bad(4, "the header declares %d data bytes (shape %v of %d-byte elements), over the cap of %d bytes (raise it with data.IDXMaxBytes if the file is trusted)",
			declared, shape, size, s.maxBytes)
	}
	a := &Array{Shape: shape}
	a.Data, got, err = readIDXData(s.r, code, n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil, bad(len(hdr)+got, "file truncated: shape %v of %d-byte elements needs more than the %d data bytes present", shape, size, got)
	}
	if err != nil {
		return nil, s.readErr(err)
	}
	// Reading on to the end also verifies the gzip checksum.
	extra, err := io.CopyN(io.Discard, s.r, trailingProbe)
	if err != nil && err != io.EOF {
		return nil, s.readErr(err)
	}
	if extra > 0 {
		more := ""
		if extra == trailingProbe {
			more = "at least "
		}
		return nil, bad(len(hdr)+n*size, "%s%d trailing bytes after the %v data the header declares", more, extra, shape)
	}
	return a, nil
}

// parseIDXHeader checks a header read up to its declared end (or the end of
// the stream) and returns its type code and shape.
func parseIDXHeader(b []byte, name string) (byte, []int, error) {
	bad := func(off int, format string, args ...any) error {
		return fmt.Errorf("%w: %s: byte %d: %s", ErrFormat, name, off, fmt.Sprintf(format, args...))
	}
	if len(b) < 4 {
		return 0, nil, bad(len(b), "file too short for the 4-byte IDX magic (%d bytes)", len(b))
	}
	if b[0] != 0 || b[1] != 0 {
		return 0, nil, bad(0, "bad IDX magic % x (want 00 00 <type> <ndim>)", b[:4])
	}
	code, ndim := b[2], int(b[3])
	if _, ok := idxElemSize(b); !ok {
		return 0, nil, bad(2, "unknown IDX type code 0x%02x", code)
	}
	if ndim == 0 {
		return 0, nil, bad(3, "IDX file with 0 dimensions")
	}
	if len(b) < 4+4*ndim {
		return 0, nil, bad(len(b), "file ends inside the dimensions (%d dimensions need %d header bytes)", ndim, 4+4*ndim)
	}
	return code, idxShape(b), nil
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

// readIDXData reads n big-endian elements of type code from r. got counts
// the bytes read, for the error offset when r ends early (io.EOF or
// io.ErrUnexpectedEOF).
func readIDXData(r io.Reader, code byte, n int) (data any, got int, err error) {
	switch code {
	case idxUint8:
		d := make([]uint8, n)
		got, err = io.ReadFull(r, d)
		return d, got, err
	case idxInt8:
		return readElems(r, n, 1, func(b []byte) int8 { return int8(b[0]) })
	case idxInt16:
		return readElems(r, n, 2, func(b []byte) int16 { return int16(binary.BigEndian.Uint16(b)) })
	case idxInt32:
		return readElems(r, n, 4, func(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) })
	case idxFloat32:
		return readElems(r, n, 4, func(b []byte) float32 { return math.Float32frombits(binary.BigEndian.Uint32(b)) })
	default: // idxFloat64; parseIDXHeader has refused every other code
		return readElems(r, n, 8, func(b []byte) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b)) })
	}
}

// readElems converts n elements of size bytes into a []T through one
// idxChunk buffer, so the raw bytes never exist beside the typed array.
func readElems[T any](r io.Reader, n, size int, elem func([]byte) T) ([]T, int, error) {
	d := make([]T, n)
	buf := make([]byte, idxChunk)
	per, got := len(buf)/size, 0
	for i := 0; i < n; i += per {
		k := min(per, n-i)
		m, err := io.ReadFull(r, buf[:k*size])
		got += m
		if err != nil {
			return nil, got, err
		}
		for j := range k {
			d[i+j] = elem(buf[j*size:])
		}
	}
	return d, got, nil
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
func LoadMNIST(imagesPath, labelsPath string, opts ...IDXOption) (*TensorDataset, error) {
	img, err := ReadIDX(imagesPath, opts...)
	if err != nil {
		return nil, err
	}
	lab, err := ReadIDX(labelsPath, opts...)
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
