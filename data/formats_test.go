package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestReadCSV(t *testing.T) {
	const good = "a,b,label,c\n1,2,0,3\n4, 5 ,1,6\n-1e3,0.5,2,NaN\n"
	p := writeFile(t, "good.csv", []byte(good))

	t.Run("labels by name", func(t *testing.T) {
		ds, err := ReadCSV(p, CSVOptions{Header: true, Target: "label", Labels: true})
		require.NoError(t, err)
		require.Equal(t, 3, ds.Len())
		assert.Equal(t, []int{3, 3}, ds.Inputs().Shape())
		assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, ds.Inputs().F32()[:6])
		assert.Equal(t, []int{0, 1, 2}, ds.Labels())
	})
	t.Run("float target by index", func(t *testing.T) {
		ds, err := ReadCSV(p, CSVOptions{Header: true, Target: "-1", DType: tensor.Float64})
		require.NoError(t, err)
		assert.Equal(t, []int{3, 1}, ds.Targets().Shape())
		assert.Equal(t, []float64{1, 2, 0, 4, 5, 1, -1000, 0.5, 2}, ds.Inputs().F64())
		assert.Equal(t, 6.0, ds.Targets().F64()[1])
	})
	t.Run("no target, semicolons, no header", func(t *testing.T) {
		ds, err := DecodeCSV(strings.NewReader("1;2\n3;4\n"), "semi.csv", CSVOptions{Comma: ';'})
		require.NoError(t, err)
		assert.Equal(t, []int{2, 2}, ds.Inputs().Shape())
		assert.Nil(t, ds.Targets())
	})

	for _, tc := range []struct {
		name, body string
		opts       CSVOptions
		want       string
	}{
		{"bad number", "a,b\n1,2\n3,x\n", CSVOptions{Header: true}, "bad.csv: line 3, column 2"},
		{"ragged row", "1,2\n3,4,5\n", CSVOptions{}, "bad.csv: line 2"},
		{"bad label", "1,2\n3,2.5\n", CSVOptions{Target: "1", Labels: true}, "bad.csv: line 2, column 2"},
		{"bare quote", "1,\"2\n", CSVOptions{}, "bad.csv: line 1"},
		{"empty", "", CSVOptions{Header: true}, "bad.csv: empty file"},
		{"header only", "a,b\n", CSVOptions{Header: true}, "bad.csv: no data rows"},
		{"unknown target", "a,b\n1,2\n", CSVOptions{Header: true, Target: "z"}, "no column named"},
		{"target out of range", "1,2\n", CSVOptions{Target: "5"}, "out of range"},
		{"only target", "1\n2\n", CSVOptions{Target: "0"}, "no input columns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCSV(strings.NewReader(tc.body), "bad.csv", tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := DecodeCSV(strings.NewReader("1,x\n"), "f.csv", CSVOptions{})
	require.ErrorIs(t, err, ErrFormat)
}

func idxBytes(code byte, dims []uint32, body []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, code, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(body)
	return b.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestIDX(t *testing.T) {
	// A tiny MNIST: 3 images of 2x2 and 3 labels, one pair gzipped.
	imgs := idxBytes(0x08, []uint32{3, 2, 2}, []byte{0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8})
	labs := idxBytes(0x08, []uint32{3}, []byte{7, 0, 9})
	dir := t.TempDir()
	ip := filepath.Join(dir, "train-images-idx3-ubyte.gz")
	lp := filepath.Join(dir, "train-labels-idx1-ubyte")
	require.NoError(t, os.WriteFile(ip, gz(t, imgs), 0o644))
	require.NoError(t, os.WriteFile(lp, labs, 0o644))
	ds, err := LoadMNIST(ip, lp)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4}, ds.Inputs().Shape())
	assert.Equal(t, []float32{0, 1, 0.2, 0.4}, ds.Inputs().F32()[:4])
	assert.Equal(t, []int{7, 0, 9}, ds.Labels())

	t.Run("round trip", func(t *testing.T) {
		for _, a := range []*Array{
			{Shape: []int{2, 3}, Data: []float32{1, -2, 3.5, 4, 5, 6}},
			{Shape: []int{2}, Data: []float64{1e300, -2}},
			{Shape: []int{3}, Data: []int32{-1, 0, 1 << 30}},
			{Shape: []int{2}, Data: []int16{-300, 300}},
			{Shape: []int{2}, Data: []int8{-3, 3}},
		} {
			var buf bytes.Buffer
			require.NoError(t, WriteIDX(&buf, a))
			back, err := DecodeIDX(&buf, "rt")
			require.NoError(t, err)
			assert.Equal(t, a, back)
		}
		require.Error(t, WriteIDX(&bytes.Buffer{}, &Array{Shape: []int{1}, Data: []int64{1}}))
	})

	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"short", []byte{0, 0}, "x.idx: byte 2"},
		{"magic", []byte{1, 0, 8, 1, 0, 0, 0, 0}, "x.idx: byte 0: bad IDX magic"},
		{"type", []byte{0, 0, 7, 1, 0, 0, 0, 0}, "byte 2: unknown IDX type code 0x07"},
		{"no dims", []byte{0, 0, 8, 0}, "0 dimensions"},
		{"dims cut", []byte{0, 0, 8, 2, 0, 0, 0, 1}, "byte 8: file ends inside the dimensions"},
		{"truncated", idxBytes(0x0C, []uint32{2}, []byte{0, 0, 0, 1, 0}), "byte 13: file truncated"},
		{"huge claim", idxBytes(0x0D, []uint32{1 << 31, 1 << 31, 1 << 31}, []byte{1}), "file truncated"},
		{"trailing", idxBytes(0x08, []uint32{2}, []byte{1, 2, 3}), "byte 10: 1 trailing bytes"},
		{"bad gzip", []byte{0x1f, 0x8b, 0, 0}, "x.idx: gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeIDX(bytes.NewReader(tc.in), "x.idx")
			require.ErrorIs(t, err, ErrFormat)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err = ReadIDX(filepath.Join(dir, "missing"))
	require.Error(t, err)
}

func npyHeaderBytes(major byte, dict string) []byte {
	var b bytes.Buffer
	b.Write(npyMagic)
	b.Write([]byte{major, 0})
	if major == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(dict)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(dict)))
	}
	b.WriteString(dict)
	return b.Bytes()
}

func TestNPY(t *testing.T) {
	t.Run("round trip", func(t *testing.T) {
		for _, a := range []*Array{
			{Shape: []int{2, 3}, Data: []float32{1, -2, 3.5, 4, 5, 6}},
			{Shape: []int{2}, Data: []float64{1e300, -2}},
			{Shape: []int{3}, Data: []int32{-1, 0, 1 << 30}},
			{Shape: []int{3}, Data: []int64{-1, 0, 1 << 60}},
			{Shape: []int{2, 1, 2}, Data: []uint8{0, 1, 2, 255}},
			{Shape: []int{}, Data: []float32{7}},
			{Shape: []int{0, 4}, Data: []float32{}},
		} {
			var buf bytes.Buffer
			require.NoError(t, WriteNPY(&buf, a))
			back, err := DecodeNPY(&buf, "rt.npy")
			require.NoError(t, err)
			assert.Equal(t, a, back)
		}
	})
	t.Run("v2 header and big-endian", func(t *testing.T) {
		b := npyHeaderBytes(2, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n")
		b = append(b, 0, 0, 1, 0, 0xff, 0xff, 0xff, 0xfe)
		a, err := DecodeNPY(bytes.NewReader(b), "v2.npy")
		require.NoError(t, err)
		assert.Equal(t, []int32{256, -2}, a.Data)
		assert.Equal(t, []int{2}, a.Shape)
	})

	dict := func(d string) []byte { return npyHeaderBytes(1, d) }
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"short", []byte("\x93NUM"), "x.npy: byte 4"},
		{"magic", []byte("\x93NUMPZ\x01\x00\x00\x00"), "byte 0: bad npy magic"},
		{"version", []byte("\x93NUMPY\x09\x00\x00\x00"), "byte 6: unsupported npy format version 9"},
		{"header cut", append([]byte("\x93NUMPY\x01\x00"), 0xff, 0x00, '{'), "file ends inside the 255-byte header"},
		{"v2 huge header", append([]byte("\x93NUMPY\x02\x00"), 0xff, 0xff, 0xff, 0x7f), "byte 8: header length"},
		{"fortran", dict("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }"), "fortran_order"},
		{"dtype", dict("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }"), "unsupported dtype \"<c8\""},
		{"structured", dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }"), "structured"},
		{"missing key", dict("{'descr': '<f4', 'shape': (1,), }"), "missing key \"fortran_order\""},
		{"bad dim", dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"), "byte 61: header: bad dimension \"-\""},
		{"unterminated", dict("{'descr"), "unterminated string"},
		{"truncated data", append(dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }"), 1, 2, 3), "data truncated"},
		{"huge shape", dict("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"), "data truncated"},
		{"trailing", append(dict("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }"), 1, 2), "1 trailing bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeNPY(bytes.NewReader(tc.in), "x.npy")
			require.ErrorIs(t, err, ErrFormat)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestNPYFromNumpy reads files written by numpy itself, when it is installed.
func TestNPYFromNumpy(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	script := `import numpy as np, sys
d = sys.argv[1]
np.save(d + '/f4.npy', np.arange(12, dtype='<f4').reshape(3, 4) / 4)
np.save(d + '/f8.npy', np.array([[1.5, -2.25]], dtype='<f8'))
np.save(d + '/i4.npy', np.array([-7, 8], dtype='<i4'))
np.save(d + '/i8.npy', np.array([2**40, -1], dtype='<i8'))
np.save(d + '/u1.npy', np.arange(6, dtype='u1').reshape(2, 3))
np.lib.format.write_array(open(d + '/v2.npy', 'wb'), np.ones((2, 2), dtype='<f4'), version=(2, 0))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Skipf("numpy unavailable: %v\n%s", err, out)
	}
	for name, want := range map[string]*Array{
		"f4": {Shape: []int{3, 4}, Data: []float32{0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75}},
		"f8": {Shape: []int{1, 2}, Data: []float64{1.5, -2.25}},
		"i4": {Shape: []int{2}, Data: []int32{-7, 8}},
		"i8": {Shape: []int{2}, Data: []int64{1 << 40, -1}},
		"u1": {Shape: []int{2, 3}, Data: []uint8{0, 1, 2, 3, 4, 5}},
		"v2": {Shape: []int{2, 2}, Data: []float32{1, 1, 1, 1}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ReadNPY(filepath.Join(dir, name+".npy"))
			require.NoError(t, err)
			assert.Equal(t, want, got)
			// numpy can read what we write.
			var buf bytes.Buffer
			require.NoError(t, WriteNPY(&buf, got))
			mine := filepath.Join(dir, name+"_go.npy")
			require.NoError(t, os.WriteFile(mine, buf.Bytes(), 0o644))
			chk := "import numpy as np, sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); assert a.dtype==b.dtype and a.shape==b.shape and (a==b).all()"
			out, err := exec.Command(py, "-c", chk, filepath.Join(dir, name+".npy"), mine).CombinedOutput()
			require.NoError(t, err, "%s", out)
		})
	}
}
