package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"unsafe"

	"github.com/goddp/goddp/tensor"
)

// Safetensors layout (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header, then the raw
// little-endian, C-order tensor bytes. The header maps each tensor name to
// {"dtype","shape","data_offsets":[begin,end]} (offsets relative to the data
// section) and may hold "__metadata__", a string-to-string map.
//
// goddp adds one metadata key, ChunkedChecksumKey ("goddp.sha256-4MiB"):
// the hex SHA-256 of the concatenated SHA-256 digests of the file's
// consecutive 4 MiB pieces (the last one shorter), computed with the 64
// digest characters themselves replaced by '0'. Files written before
// 2026-11-29 carry ChecksumKey ("goddp.sha256", the SHA-256 of the whole
// file, digest zeroed the same way) instead, and still verify. Either covers
// the length prefix, every header byte and all tensor data, so any
// corruption or truncation is detected; other readers just see an extra
// metadata string. checksum.go computes both.

// MaxHeaderSize bounds the JSON header, as the reference implementation does
// (100 MB), so a hostile length cannot drive allocation.
const MaxHeaderSize = 100 << 20

const digestLen = 2 * sha256.Size

var zeroDigest = bytes.Repeat([]byte{'0'}, digestLen)

type entry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

var nativeLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// tensorBytes returns t's elements as little-endian bytes; on little-endian
// hosts the slice aliases t's storage.
func tensorBytes(t *tensor.Tensor) []byte {
	t = t.Contiguous()
	switch t.DType() {
	case tensor.Int64:
		return leBytes(t.I64(), func(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) })
	case tensor.Float64:
		return leBytes(t.F64(), func(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) })
	}
	return leBytes(t.F32(), func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })
}

// leBytes is d as little-endian bytes: d's own memory on a little-endian
// host, else a copy written element by element with put.
func leBytes[T int64 | float64 | float32](d []T, put func([]byte, T)) []byte {
	if len(d) == 0 {
		return nil
	}
	size := int(unsafe.Sizeof(d[0]))
	if nativeLittle {
		return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), size*len(d))
	}
	b := make([]byte, size*len(d))
	for i, v := range d {
		put(b[size*i:], v)
	}
	return b
}

func dtypeName(dt tensor.DType) string {
	switch dt {
	case tensor.Float64:
		return "F64"
	case tensor.Int64:
		return "I64"
	}
	return "F32"
}

// encodeHeader builds the padded header (with a zero digest when checksum is
// set) and the tensor order.
func encodeHeader(tensors map[string]*tensor.Tensor, metadata map[string]string, checksum bool) ([]byte, []string, error) {
	names := make([]string, 0, len(tensors))
	for name, t := range tensors {
		if name == "__metadata__" {
			return nil, nil, fmt.Errorf("%w: tensor name %q is reserved", ErrUnsupported, name)
		}
		if t == nil {
			return nil, nil, fmt.Errorf("%w: tensor %q is nil", ErrUnsupported, name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	hdr := make(map[string]any, len(names)+1)
	var off int64
	for _, name := range names {
		t := tensors[name]
		n := int64(t.Numel()) * int64(t.DType().Size())
		shape := append([]int{}, t.Shape()...)
		hdr[name] = entry{DType: dtypeName(t.DType()), Shape: shape, Offsets: [2]int64{off, off + n}}
		off += n
	}
	meta := make(map[string]string, len(metadata)+1)
	for k, v := range metadata {
		meta[k] = v
	}
	// A digest in the caller's metadata (say, re-saving what Load returned)
	// describes another file: drop it, old form included.
	delete(meta, ChecksumKey)
	delete(meta, ChunkedChecksumKey)
	if checksum {
		meta[ChunkedChecksumKey] = string(zeroDigest)
	}
	if len(meta) > 0 {
		hdr["__metadata__"] = meta
	}
	js, err := json.Marshal(hdr) // map keys are sorted: deterministic
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: encode safetensors header: %w", err)
	}
	// Pad with spaces so the data section starts 8-byte aligned.
	for (8+len(js))%8 != 0 {
		js = append(js, ' ')
	}
	return js, names, nil
}

// WriteSafetensors writes tensors and metadata in the safetensors format,
// tensors sorted by name, with the goddp checksum in the metadata: float32
// as F32, float64 as F64, int64 as I64 (torch's dtypes of the same names).
func WriteSafetensors(w io.Writer, tensors map[string]*tensor.Tensor, metadata map[string]string) error {
	tensors, err := onHost(tensors)
	if err != nil {
		return err
	}
	hdr, names, err := encodeHeader(tensors, metadata, true)
	if err != nil {
		return err
	}
	at := digestPos(hdr, ChunkedChecksumKey)
	if at < 0 {
		return fmt.Errorf("checkpoint: internal error: checksum placeholder not found in header")
	}
	parts := make([][]byte, 0, len(names)+2)
	parts = append(parts, binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))), hdr)
	size := int64(8 + len(hdr))
	for _, name := range names {
		b := tensorBytes(tensors[name])
		parts = append(parts, b)
		size += int64(len(b))
	}
	if p, ok := w.(patcher); ok {
		return writeOnePass(p, parts, size, 8+at)
	}
	// First pass: hash the file as it will be written, digest zeroed.
	h := newChunkHasher(size)
	c := chunker{emit: func(i int, ps [][]byte) error { h.add(i, ps); return nil }}
	for _, b := range parts {
		c.write(b)
	}
	c.flush()
	copy(hdr[at:], h.sum())
	// Second pass: write.
	bw := bufio.NewWriterSize(w, 1<<20)
	for _, b := range parts {
		bw.Write(b)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	return nil
}

// patcher is a writer into a fresh file that can also write at an offset
// (internal/atomicfile.File, what WriteFileAtomic's write function gets).
type patcher interface {
	io.Writer
	WriteAt(b []byte, off int64) (int, error)
}

// writeOnePass writes the file (parts, size bytes in all, the digest at
// file offset at still zeroed) once, handing each 4 MiB piece to the
// hashing goroutines before writing it, then writes the digest into the
// header. The sum is the one the two-pass path computes; the tensors are
// read in place (by the writer and by one hasher), never copied, and the
// hashing runs on every core while the writer waits on the kernel.
func writeOnePass(w patcher, parts [][]byte, size int64, at int) error {
	h := newChunkHasher(size)
	c := chunker{emit: func(i int, ps [][]byte) error {
		h.add(i, ps)
		for _, p := range ps {
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		return nil
	}}
	var err error
	for _, b := range parts {
		if err = c.write(b); err != nil {
			break
		}
	}
	if err == nil {
		err = c.flush()
	}
	digest := h.sum() // also on error: the workers must end before the tensors may change
	if err != nil {
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	if _, err := w.WriteAt(digest, int64(at)); err != nil {
		return fmt.Errorf("checkpoint: write safetensors checksum: %w", err)
	}
	return nil
}

// digestPos finds the digest's value in a compact header written by
// encodeHeader: `"<key>":"<64 chars>"`.
func digestPos(hdr []byte, key string) int {
	k := []byte(`"` + key + `":"`)
	i := bytes.Index(hdr, k)
	if i < 0 || i+len(k)+digestLen+1 > len(hdr) || hdr[i+len(k)+digestLen] != '"' {
		return -1
	}
	return i + len(k)
}

// EncodeSafetensors is WriteSafetensors into memory.
func EncodeSafetensors(tensors map[string]*tensor.Tensor, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, tensors, metadata); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SaveSafetensors writes a safetensors file atomically (see WriteFileAtomic).
func SaveSafetensors(path string, tensors map[string]*tensor.Tensor, metadata map[string]string) error {
	return WriteFileAtomic(path, func(w io.Writer) error { return WriteSafetensors(w, tensors, metadata) })
}

// LoadSafetensors reads and verifies a safetensors file; errors name it.
func LoadSafetensors(path string) (map[string]*tensor.Tensor, map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	return DecodeSafetensors(b, path)
}

// DecodeSafetensors parses a safetensors file held in b; name labels errors.
// Every size in the header is checked against b before anything is allocated.
// When the metadata holds ChunkedChecksumKey or ChecksumKey the digest is
// verified (on all cores). F32 and F64
// tensors load as such, and I64 as int64 (torch's long: labels, counters
// such as num_batches_tracked); F16 and BF16 are widened to float32; the
// other integer and BOOL tensors are converted to float64 (exact up to
// 2^53).
func DecodeSafetensors(b []byte, name string) (map[string]*tensor.Tensor, map[string]string, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, name, fmt.Sprintf(format, args...))
	}
	if len(b) < 8 {
		return nil, nil, bad("%d bytes, too short for the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeaderSize {
		return nil, nil, bad("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if 8+n > uint64(len(b)) {
		return nil, nil, bad("truncated: header length %d but the file has %d bytes", n, len(b))
	}
	hdr := b[8 : 8+n]
	data := b[8+n:]
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, nil, bad("header does not start with '{'")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, nil, bad("header JSON: %v", err)
	}
	if err := uniqueKeys(hdr); err != nil {
		return nil, nil, bad("%v", err)
	}
	var meta map[string]string
	if m, ok := raw["__metadata__"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, nil, bad("__metadata__ must map strings to strings: %v", err)
		}
		delete(raw, "__metadata__")
	}
	if err := verifyDigest(b, hdr, meta); err != nil {
		return nil, nil, bad("%v", err)
	}
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(raw))
	entries := make(map[string]entry, len(raw))
	for tname, js := range raw {
		var e entry
		if err := json.Unmarshal(js, &e); err != nil {
			return nil, nil, bad("tensor %q: %v", tname, err)
		}
		size := elemSize(e.DType)
		if size == 0 {
			return nil, nil, fmt.Errorf("%w: %s: tensor %q has dtype %q", ErrUnsupported, name, tname, e.DType)
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		if begin < 0 || end < begin || end > int64(len(data)) {
			return nil, nil, bad("tensor %q: data_offsets [%d, %d] outside the %d data bytes (truncated?)", tname, begin, end, len(data))
		}
		numel, ok := checkedNumel(e.Shape, (end-begin)/int64(size))
		if !ok || numel*int64(size) != end-begin {
			return nil, nil, bad("tensor %q: shape %v of %s does not fill data_offsets [%d, %d]", tname, e.Shape, e.DType, begin, end)
		}
		entries[tname] = e
		spans = append(spans, span{tname, begin, end})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var pos int64
	for _, s := range spans { // the buffer must be covered exactly, without holes or overlaps
		if s.begin != pos {
			return nil, nil, bad("tensor %q starts at data byte %d, expected %d (hole or overlap)", s.name, s.begin, pos)
		}
		pos = s.end
	}
	if pos != int64(len(data)) {
		return nil, nil, bad("tensors cover %d data bytes but the file has %d", pos, len(data))
	}
	tensors := make(map[string]*tensor.Tensor, len(entries))
	for tname, e := range entries {
		tensors[tname] = decodeTensor(e, data[e.Offsets[0]:e.Offsets[1]])
	}
	return tensors, meta, nil
}

func elemSize(dtype string) int {
	switch dtype {
	case "BOOL", "U8", "I8":
		return 1
	case "I16", "U16", "F16", "BF16":
		return 2
	case "I32", "U32", "F32":
		return 4
	case "I64", "U64", "F64":
		return 8
	}
	return 0
}

// checkedNumel multiplies dims, failing on a negative dim or a product over
// limit. Every dim is checked before a zero can end the product: [0, -1]
// must fail, or the tensor package panics on the -1 later.
func checkedNumel(shape []int, limit int64) (int64, bool) {
	zero := false
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		zero = zero || d == 0
	}
	if zero {
		return 0, true
	}
	n := int64(1)
	for _, d := range shape {
		if n > limit/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

func decodeTensor(e entry, b []byte) *tensor.Tensor {
	le := binary.LittleEndian
	shape := append([]int{}, e.Shape...)
	switch e.DType {
	case "F32", "F16", "BF16":
		size := elemSize(e.DType)
		out := make([]float32, len(b)/size)
		for i := range out {
			switch e.DType {
			case "F32":
				out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
			case "F16":
				out[i] = halfToFloat(le.Uint16(b[2*i:]))
			default:
				out[i] = math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16)
			}
		}
		return tensor.FromF32(out, shape...)
	case "I64":
		out := make([]int64, len(b)/8)
		for i := range out {
			out[i] = int64(le.Uint64(b[8*i:]))
		}
		return tensor.FromI64(out, shape...)
	}
	size := elemSize(e.DType)
	out := make([]float64, len(b)/size)
	for i := range out {
		switch e.DType {
		case "F64":
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		case "BOOL", "U8":
			out[i] = float64(b[i])
		case "I8":
			out[i] = float64(int8(b[i]))
		case "I16":
			out[i] = float64(int16(le.Uint16(b[2*i:])))
		case "U16":
			out[i] = float64(le.Uint16(b[2*i:]))
		case "I32":
			out[i] = float64(int32(le.Uint32(b[4*i:])))
		case "U32":
			out[i] = float64(le.Uint32(b[4*i:]))
		case "I64":
			out[i] = float64(int64(le.Uint64(b[8*i:])))
		case "U64":
			out[i] = float64(le.Uint64(b[8*i:]))
		}
	}
	return tensor.FromF64(out, shape...)
}

// halfToFloat converts an IEEE binary16 value to float32.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or nan
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value = frac * 2^-24
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

// onHost returns tensors with every tensor that lives on a device replaced
// by a host copy (a device model's state is saved from host memory); the
// map itself when all are on the host.
func onHost(tensors map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	var out map[string]*tensor.Tensor
	for k, t := range tensors {
		if t == nil || t.IsCPU() {
			continue
		}
		if out == nil {
			out = make(map[string]*tensor.Tensor, len(tensors))
			for k2, t2 := range tensors {
				out[k2] = t2
			}
		}
		h, err := t.To(tensor.CPU())
		if err != nil {
			return nil, fmt.Errorf("checkpoint: copying %q from %v to the host: %w", k, t.Device(), err)
		}
		out[k] = h
	}
	if out == nil {
		return tensors, nil
	}
	return out, nil
}
