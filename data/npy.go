package data

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

var npyMagic = []byte("\x93NUMPY")

// ReadNPY reads a NumPy .npy file (format versions 1.0, 2.0 and 3.0) holding
// a C-order array of dtype <f4, <f8, <i4, <i8 or u1 (also i1, i2 and the
// big-endian forms). Fortran order, structured dtypes and pickled objects are
// rejected with an error.
func ReadNPY(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: read npy: %w", err)
	}
	defer f.Close()
	return DecodeNPY(f, path)
}

// DecodeNPY reads .npy data from r; name labels errors, which give the byte
// offset of the problem.
func DecodeNPY(r io.Reader, name string) (*Array, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("data: read npy %s: %w", name, err)
	}
	return parseNPY(b, name)
}

type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
}

func parseNPY(b []byte, name string) (*Array, error) {
	bad := func(off int, format string, args ...any) error {
		return fmt.Errorf("%w: %s: byte %d: %s", ErrFormat, name, off, fmt.Sprintf(format, args...))
	}
	if len(b) < 10 {
		return nil, bad(len(b), "file too short for an npy preamble (%d bytes)", len(b))
	}
	if !bytes.Equal(b[:6], npyMagic) {
		return nil, bad(0, "bad npy magic %q", b[:6])
	}
	major := b[6]
	var hlen, start int
	switch major {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, bad(len(b), "file too short for an npy v%d preamble", major)
		}
		h := binary.LittleEndian.Uint32(b[8:])
		if uint64(h) > uint64(len(b)) {
			return nil, bad(8, "header length %d exceeds the file (%d bytes)", h, len(b))
		}
		hlen, start = int(h), 12
	default:
		return nil, bad(6, "unsupported npy format version %d.%d", major, b[7])
	}
	if start+hlen > len(b) {
		return nil, bad(len(b), "file ends inside the %d-byte header", hlen)
	}
	h, err := parseNPYHeader(b[start:start+hlen], start)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, name, err)
	}
	if h.fortran {
		return nil, bad(start, "fortran_order arrays are not supported; save with np.ascontiguousarray")
	}
	body := b[start+hlen:]
	return decodeNPYBody(h, body, start+hlen, bad)
}

func decodeNPYBody(h npyHeader, body []byte, off int, bad func(int, string, ...any) error) (*Array, error) {
	if len(h.descr) < 3 {
		return nil, bad(off, "unsupported dtype %q", h.descr)
	}
	order, kind := h.descr[0], h.descr[1:]
	var bo binary.ByteOrder
	switch order {
	case '<', '|', '=':
		bo = binary.LittleEndian
	case '>':
		bo = binary.BigEndian
	default:
		return nil, bad(off, "unsupported dtype %q", h.descr)
	}
	size := map[string]int{"u1": 1, "i1": 1, "i2": 2, "i4": 4, "i8": 8, "f4": 4, "f8": 8}[kind]
	if size == 0 {
		return nil, bad(off, "unsupported dtype %q (want <f4, <f8, <i4, <i8 or u1)", h.descr)
	}
	n, ok := checkedElems(h.shape, len(body)/size)
	if !ok || n*size > len(body) {
		return nil, bad(off+len(body), "data truncated: shape %v of %s needs more than the %d data bytes present", h.shape, h.descr, len(body))
	}
	if n*size < len(body) {
		return nil, bad(off+n*size, "%d trailing bytes after the %v data", len(body)-n*size, h.shape)
	}
	a := &Array{Shape: h.shape}
	switch kind {
	case "u1":
		a.Data = append([]uint8(nil), body...)
	case "i1":
		d := make([]int8, n)
		for i := range d {
			d[i] = int8(body[i])
		}
		a.Data = d
	case "i2":
		d := make([]int16, n)
		for i := range d {
			d[i] = int16(bo.Uint16(body[2*i:]))
		}
		a.Data = d
	case "i4":
		d := make([]int32, n)
		for i := range d {
			d[i] = int32(bo.Uint32(body[4*i:]))
		}
		a.Data = d
	case "i8":
		d := make([]int64, n)
		for i := range d {
			d[i] = int64(bo.Uint64(body[8*i:]))
		}
		a.Data = d
	case "f4":
		d := make([]float32, n)
		for i := range d {
			d[i] = math.Float32frombits(bo.Uint32(body[4*i:]))
		}
		a.Data = d
	case "f8":
		d := make([]float64, n)
		for i := range d {
			d[i] = math.Float64frombits(bo.Uint64(body[8*i:]))
		}
		a.Data = d
	}
	return a, nil
}

// npyLexer reads the Python dict literal of an npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
type npyLexer struct {
	s    []byte
	i    int
	base int // file offset of s[0], for error messages
}

func (l *npyLexer) errorf(format string, args ...any) error {
	return fmt.Errorf("byte %d: header: %s", l.base+l.i, fmt.Sprintf(format, args...))
}

func (l *npyLexer) skip() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t' || l.s[l.i] == '\n' || l.s[l.i] == '\r') {
		l.i++
	}
}

func (l *npyLexer) peek() byte {
	l.skip()
	if l.i >= len(l.s) {
		return 0
	}
	return l.s[l.i]
}

func (l *npyLexer) expect(c byte) error {
	if l.peek() != c {
		if l.i >= len(l.s) {
			return l.errorf("unexpected end, want %q", c)
		}
		return l.errorf("found %q, want %q", l.s[l.i], c)
	}
	l.i++
	return nil
}

func (l *npyLexer) str() (string, error) {
	q := l.peek()
	if q != '\'' && q != '"' {
		return "", l.errorf("want a quoted string")
	}
	end := bytes.IndexByte(l.s[l.i+1:], q)
	if end < 0 {
		return "", l.errorf("unterminated string")
	}
	v := string(l.s[l.i+1 : l.i+1+end])
	l.i += end + 2
	return v, nil
}

func (l *npyLexer) word() string {
	l.skip()
	j := l.i
	for j < len(l.s) && (l.s[j] >= 'a' && l.s[j] <= 'z' || l.s[j] >= 'A' && l.s[j] <= 'Z' || l.s[j] >= '0' && l.s[j] <= '9' || l.s[j] == '_') {
		j++
	}
	w := string(l.s[l.i:j])
	l.i = j
	return w
}

func (l *npyLexer) shape() ([]int, error) {
	if err := l.expect('('); err != nil {
		return nil, err
	}
	shape := []int{}
	for {
		if l.peek() == ')' {
			l.i++
			return shape, nil
		}
		at := l.i
		w := l.word()
		w = strings.TrimSuffix(w, "L") // Python 2 longs
		d, err := strconv.Atoi(w)
		if err != nil || d < 0 {
			l.i = at
			if w == "" && at < len(l.s) {
				w = string(l.s[at])
			}
			return nil, l.errorf("bad dimension %q in shape", w)
		}
		shape = append(shape, d)
		if l.peek() == ',' {
			l.i++
		} else if l.peek() != ')' {
			return nil, l.errorf("want ',' or ')' in shape")
		}
	}
}

func parseNPYHeader(s []byte, base int) (npyHeader, error) {
	l := &npyLexer{s: s, base: base}
	var h npyHeader
	seen := map[string]bool{}
	if err := l.expect('{'); err != nil {
		return h, err
	}
	for {
		if l.peek() == '}' {
			l.i++
			break
		}
		key, err := l.str()
		if err != nil {
			return h, err
		}
		if err := l.expect(':'); err != nil {
			return h, err
		}
		switch key {
		case "descr":
			if l.peek() == '[' {
				return h, l.errorf("structured dtypes are not supported")
			}
			if h.descr, err = l.str(); err != nil {
				return h, err
			}
		case "fortran_order":
			switch w := l.word(); w {
			case "True":
				h.fortran = true
			case "False":
				h.fortran = false
			default:
				return h, l.errorf("fortran_order must be True or False, found %q", w)
			}
		case "shape":
			if h.shape, err = l.shape(); err != nil {
				return h, err
			}
		default:
			return h, l.errorf("unknown header key %q", key)
		}
		seen[key] = true
		if l.peek() == ',' {
			l.i++
		} else if l.peek() != '}' {
			return h, l.errorf("want ',' or '}' after %q", key)
		}
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, l.errorf("missing key %q", k)
		}
	}
	return h, nil
}

// WriteNPY writes a as a C-order, little-endian .npy file (format 1.0, or 2.0
// when the header needs it), as numpy.save does.
func WriteNPY(w io.Writer, a *Array) error {
	var descr string
	var body []byte
	switch d := a.Data.(type) {
	case []uint8:
		descr, body = "|u1", d
	case []int8:
		descr, body = "|i1", make([]byte, len(d))
		for i, v := range d {
			body[i] = byte(v)
		}
	case []int16:
		descr, body = "<i2", make([]byte, 2*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint16(body[2*i:], uint16(v))
		}
	case []int32:
		descr, body = "<i4", make([]byte, 4*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint32(body[4*i:], uint32(v))
		}
	case []int64:
		descr, body = "<i8", make([]byte, 8*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint64(body[8*i:], uint64(v))
		}
	case []float32:
		descr, body = "<f4", make([]byte, 4*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint32(body[4*i:], math.Float32bits(v))
		}
	case []float64:
		descr, body = "<f8", make([]byte, 8*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint64(body[8*i:], math.Float64bits(v))
		}
	default:
		return fmt.Errorf("%w: npy cannot hold %T", ErrConfig, a.Data)
	}
	if n, ok := checkedElems(a.Shape, math.MaxInt); !ok || n != a.Len() {
		return fmt.Errorf("%w: shape %v does not hold %d elements", ErrShape, a.Shape, a.Len())
	}
	dims := make([]string, len(a.Shape))
	for i, d := range a.Shape {
		dims[i] = strconv.Itoa(d)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	// numpy pads the header with spaces and a newline so the data starts on a
	// 64-byte boundary.
	pre := 10
	if len(dict)+1+pre > math.MaxUint16 {
		pre = 12
	}
	total := (pre + len(dict) + 1 + 63) / 64 * 64
	hdr := make([]byte, total)
	copy(hdr, npyMagic)
	if pre == 10 {
		hdr[6] = 1
		binary.LittleEndian.PutUint16(hdr[8:], uint16(total-pre))
	} else {
		hdr[6] = 2
		binary.LittleEndian.PutUint32(hdr[8:], uint32(total-pre))
	}
	copy(hdr[pre:], dict)
	for i := pre + len(dict); i < total-1; i++ {
		hdr[i] = ' '
	}
	hdr[total-1] = '\n'
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("data: write npy: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("data: write npy: %w", err)
	}
	return nil
}
