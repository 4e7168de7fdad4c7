package data

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/goddp/goddp/tensor"
)

// npyShard is an .npy file of inputs [n, ...] with optional labels or
// targets beside it. Rows are read one at a time at their offsets, so a
// shard costs one row of memory whatever its size.
type npyShard struct {
	inputs  npyFile
	labels  *npyFile // X.labels.npy: [n] integers
	targets *npyFile // X.targets.npy: [n, ...]
	spec    *sampleSpec
}

// npyFile is the header of an .npy file: where its C-order data starts, the
// element type and the shape.
type npyFile struct {
	name  string
	shape []int
	kind  string // "f4", "u1", ... (npy's descr without the byte order)
	order binary.ByteOrder
	size  int   // bytes per element
	start int64 // file offset of the data
	row   int   // elements per row (product of shape[1:])
}

func openNPYShard(path string) (*npyShard, error) {
	in, err := readNPYFileHeader(path)
	if err != nil {
		return nil, err
	}
	if len(in.shape) == 0 {
		return nil, fmt.Errorf("%w: shard %s: a scalar array has no rows", ErrFormat, path)
	}
	s := &npyShard{inputs: in}
	base := strings.TrimSuffix(path, ".npy")
	for _, side := range []struct {
		suffix string
		dst    **npyFile
	}{{".labels.npy", &s.labels}, {".targets.npy", &s.targets}} {
		p := base + side.suffix
		if _, err := os.Stat(p); err != nil {
			continue
		}
		f, err := readNPYFileHeader(p)
		if err != nil {
			return nil, err
		}
		if len(f.shape) == 0 || f.shape[0] != in.shape[0] {
			return nil, fmt.Errorf("%w: shard %s has %d rows but %s has shape %v", ErrShape, path, in.shape[0], p, f.shape)
		}
		*side.dst = &f
	}
	if s.labels != nil && s.targets != nil {
		return nil, fmt.Errorf("%w: shard %s has both %s.labels.npy and %s.targets.npy; keep one", ErrConfig, path, base, base)
	}
	if s.labels != nil && (len(s.labels.shape) != 1 || s.labels.kind[0] == 'f') {
		return nil, fmt.Errorf("%w: %s: labels must be a 1-d integer array, got %s %v", ErrShape, s.labels.name, s.labels.kind, s.labels.shape)
	}
	return s, nil
}

// readNPYFileHeader reads only the preamble and header of an .npy file and
// checks that the file is as long as its shape says.
func readNPYFileHeader(path string) (npyFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return npyFile{}, fmt.Errorf("data: shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return npyFile{}, fmt.Errorf("data: shard: %w", err)
	}
	return readNPYHeaderFrom(f, st.Size(), path)
}

// readNPYHeaderFrom reads the preamble and header of .npy data of total
// bytes from r (nothing past the header) and checks that total is what the
// shape needs; name labels errors.
func readNPYHeaderFrom(r io.Reader, total int64, path string) (npyFile, error) {
	bad := func(off int, format string, args ...any) error {
		return fmt.Errorf("%w: %s: byte %d: %s", ErrFormat, path, off, fmt.Sprintf(format, args...))
	}
	var pre [12]byte
	if _, err := io.ReadFull(r, pre[:10]); err != nil {
		return npyFile{}, bad(0, "file too short for an npy preamble")
	}
	if string(pre[:6]) != string(npyMagic) {
		return npyFile{}, bad(0, "bad npy magic %q", pre[:6])
	}
	var hlen, start int
	switch pre[6] {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(pre[8:])), 10
	case 2, 3:
		if _, err := io.ReadFull(r, pre[10:12]); err != nil {
			return npyFile{}, bad(10, "file too short for an npy v%d preamble", pre[6])
		}
		h := binary.LittleEndian.Uint32(pre[8:])
		if int64(h) > total {
			return npyFile{}, bad(8, "header length %d exceeds the file (%d bytes)", h, total)
		}
		hlen, start = int(h), 12
	default:
		return npyFile{}, bad(6, "unsupported npy format version %d.%d", pre[6], pre[7])
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return npyFile{}, bad(start, "file ends inside the %d-byte header", hlen)
	}
	h, err := parseNPYHeader(hb, start)
	if err != nil {
		return npyFile{}, fmt.Errorf("%w: %s: %w", ErrFormat, path, err)
	}
	if h.fortran {
		return npyFile{}, bad(start, "fortran_order arrays are not supported; save with np.ascontiguousarray")
	}
	if len(h.descr) < 3 {
		return npyFile{}, bad(start, "unsupported dtype %q", h.descr)
	}
	nf := npyFile{name: path, shape: h.shape, kind: h.descr[1:], start: int64(start + hlen), order: binary.LittleEndian}
	if h.descr[0] == '>' {
		nf.order = binary.BigEndian
	}
	nf.size = map[string]int{"u1": 1, "i1": 1, "i2": 2, "i4": 4, "i8": 8, "f4": 4, "f8": 8}[nf.kind]
	if nf.size == 0 || strings.IndexByte("<>|=", h.descr[0]) < 0 {
		return npyFile{}, bad(start, "unsupported dtype %q (want <f4, <f8, <i4, <i8 or u1)", h.descr)
	}
	body := total - nf.start
	n, ok := checkedElems(h.shape, int(body/int64(nf.size)))
	if !ok || int64(n*nf.size) != body {
		if n, ok = checkedElems(h.shape, math.MaxInt/nf.size); !ok {
			return npyFile{}, bad(int(nf.start), "data is %d bytes, shape %v of %s needs more than an int counts", body, h.shape, h.descr)
		}
		return npyFile{}, bad(int(nf.start), "data is %d bytes, shape %v of %s needs %d", body, h.shape, h.descr, int64(n)*int64(nf.size))
	}
	if len(h.shape) > 0 {
		// The product above is 0 when any dimension is: a shape (2^40, 0)
		// fits an empty body. Its rows hold no bytes, and numbering 2^40 of
		// them (a permutation, a row count) is what exhausts memory, so a
		// row must hold at least one element. A shard with no rows still
		// gets its row size bounded, as it sizes the read buffer.
		limit := math.MaxInt32
		if h.shape[0] > 0 {
			limit = max(limit, int(body/int64(nf.size)))
		}
		row, ok := checkedElems(h.shape[1:], limit)
		if !ok || row == 0 {
			return npyFile{}, bad(int(nf.start), "shape %v: a row of %v holds no elements (or too many)", h.shape, h.shape[1:])
		}
		nf.row = row
	}
	return nf, nil
}

// rowShape is the shape of one row ([1] for a 1-d array).
func (f *npyFile) rowShape() []int {
	if len(f.shape) == 1 {
		return []int{1}
	}
	return f.shape[1:]
}

// readRow decodes row i of f, read from r, into dst (f.row float32s).
func (f *npyFile) readRow(r io.ReaderAt, i int, buf []byte, dst []float32) error {
	b := buf[:f.row*f.size]
	if _, err := r.ReadAt(b, f.start+int64(i)*int64(len(b))); err != nil {
		return fmt.Errorf("data: shard %s: row %d: %w", f.name, i, err)
	}
	decodeFloat32(dst, b, f.kind, f.order)
	return nil
}

// decodeFloat32 converts len(dst) elements of npy kind from b.
func decodeFloat32(dst []float32, b []byte, kind string, bo binary.ByteOrder) {
	switch kind {
	case "u1":
		for k := range dst {
			dst[k] = float32(b[k])
		}
	case "i1":
		for k := range dst {
			dst[k] = float32(int8(b[k]))
		}
	case "i2":
		for k := range dst {
			dst[k] = float32(int16(bo.Uint16(b[2*k:])))
		}
	case "i4":
		for k := range dst {
			dst[k] = float32(int32(bo.Uint32(b[4*k:])))
		}
	case "i8":
		for k := range dst {
			dst[k] = float32(int64(bo.Uint64(b[8*k:])))
		}
	case "f4":
		for k := range dst {
			dst[k] = math.Float32frombits(bo.Uint32(b[4*k:]))
		}
	case "f8":
		for k := range dst {
			dst[k] = float32(math.Float64frombits(bo.Uint64(b[8*k:])))
		}
	}
}

// intAt decodes element i of a 1-d integer file whose data are b.
func (f *npyFile) intAt(b []byte, i int) int {
	b = b[i*f.size:]
	switch f.kind {
	case "u1":
		return int(b[0])
	case "i1":
		return int(int8(b[0]))
	case "i2":
		return int(int16(f.order.Uint16(b)))
	case "i4":
		return int(int32(f.order.Uint32(b)))
	default:
		return int(int64(f.order.Uint64(b)))
	}
}

// npyReadWhole is the largest shard body (bytes) read into memory at once
// (per worker; see stream).
const npyReadWhole = 64 << 20

// bytesAt reads from b as if it sat at file offset base.
type bytesAt struct {
	b    []byte
	base int64
}

func (r bytesAt) ReadAt(p []byte, off int64) (int, error) {
	off -= r.base
	if off < 0 || off+int64(len(p)) > int64(len(r.b)) {
		return 0, io.ErrUnexpectedEOF
	}
	return copy(p, r.b[off:]), nil
}

func (s *npyShard) path() string           { return s.inputs.name }
func (s *npyShard) len() int               { return s.inputs.shape[0] }
func (s *npyShard) setSpec(sp *sampleSpec) { s.spec = sp }

func (s *npyShard) info() shardInfo {
	in := shardInfo{labels: s.labels != nil, targets: s.targets != nil, input: s.inputs.rowShape()}
	if s.targets != nil {
		in.target = s.targets.rowShape()
	}
	return in
}

func (s *npyShard) stream(ctx context.Context, rng *tensor.RNG, _ int, yield func(int, Sample) bool) error {
	if s.len() == 0 {
		// Nothing to read, and the row size of a shard without rows is
		// bounded by no data: no buffers for it.
		return nil
	}
	open := func(f *npyFile) (*os.File, error) {
		if f == nil {
			return nil, nil
		}
		h, err := os.Open(f.name)
		if err != nil {
			return nil, fmt.Errorf("data: shard: %w", err)
		}
		return h, nil
	}
	in, err := open(&s.inputs)
	if err != nil {
		return err
	}
	defer in.Close()
	// The labels are read whole (8 bytes a row at most, against a row of
	// inputs): one read, not a system call per sample.
	var labels []byte
	if s.labels != nil {
		b, err := os.ReadFile(s.labels.name)
		if err != nil {
			return fmt.Errorf("data: shard: %w", err)
		}
		if end := s.labels.start + int64(s.len()*s.labels.size); int64(len(b)) != end {
			return fmt.Errorf("%w: shard %s: %s is %d bytes now, %d when the shard was opened", ErrFormat, s.inputs.name, s.labels.name, len(b), end)
		}
		labels = b[s.labels.start:]
	}
	tgt, err := open(s.targets)
	if err != nil {
		return err
	}
	if tgt != nil {
		defer tgt.Close()
	}
	order := identity(s.len())
	if rng != nil {
		order = rng.Perm(s.len())
	}
	// A shard of modest size is read in one call and its rows decoded from
	// memory: a read per row costs a system call each (about a third of the
	// loader's time at Fashion-MNIST's 3 KB rows). A larger one is read row
	// by row, so memory stays bounded whatever the shard size.
	var ra io.ReaderAt = in
	if size := int64(s.len()) * int64(s.inputs.row*s.inputs.size); size <= npyReadWhole {
		b := make([]byte, size)
		if _, err := in.ReadAt(b, s.inputs.start); err != nil {
			return fmt.Errorf("data: shard %s: %w", s.inputs.name, err)
		}
		ra = bytesAt{b, s.inputs.start}
	}
	buf := make([]byte, max(s.inputs.row*s.inputs.size, 8))
	var tbuf []byte
	if s.targets != nil {
		tbuf = make([]byte, s.targets.row*s.targets.size)
	}
	for _, i := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		x := make([]float32, s.inputs.row)
		if err := s.inputs.readRow(ra, i, buf, x); err != nil {
			return err
		}
		smp := Sample{Input: tensor.FromF32(x, s.inputs.rowShape()...)}
		if labels != nil {
			smp.Label = s.labels.intAt(labels, i)
			if err := s.spec.checkLabel(smp.Label, func() string {
				return fmt.Sprintf("shard %s: row %d (%s)", s.inputs.name, i, filepath.Base(s.labels.name))
			}); err != nil {
				return err
			}
		}
		if tgt != nil {
			y := make([]float32, s.targets.row)
			if err := s.targets.readRow(tgt, i, tbuf, y); err != nil {
				return err
			}
			smp.Target = tensor.FromF32(y, s.targets.rowShape()...)
		}
		if !yield(i, smp) {
			return nil
		}
	}
	return nil
}
