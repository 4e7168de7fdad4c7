package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func sampleTensors() map[string]*tensor.Tensor {
	return map[string]*tensor.Tensor{
		"w":      tensor.FromF32([]float32{1, -2, 3.5, 4, 5, 6}, 2, 3),
		"b":      tensor.FromF64([]float64{1e-300, -7}, 2),
		"scalar": tensor.FromF32([]float32{42}),
		"empty":  tensor.FromF32([]float32{}, 0, 4),
	}
}

func assertSameTensors(t *testing.T, want, got map[string]*tensor.Tensor) {
	t.Helper()
	require.Len(t, got, len(want))
	for k, w := range want {
		g, ok := got[k]
		require.True(t, ok, "missing %s", k)
		assert.Equal(t, w.DType(), g.DType(), k)
		assert.Equal(t, w.Shape(), g.Shape(), k)
		if w.DType() == tensor.Float64 {
			assert.Equal(t, w.Contiguous().F64(), g.F64(), k)
		} else {
			assert.Equal(t, w.Contiguous().F32(), g.F32(), k)
		}
	}
}

func TestSafetensorsRoundTrip(t *testing.T) {
	ts := sampleTensors()
	meta := map[string]string{"format": "pt", "note": `quotes " and <tags> & unicode é`}
	b, err := EncodeSafetensors(ts, meta)
	require.NoError(t, err)
	b2, err := EncodeSafetensors(ts, meta)
	require.NoError(t, err)
	assert.Equal(t, b, b2, "deterministic")

	n := binary.LittleEndian.Uint64(b)
	assert.Zero(t, (8+n)%8, "data section is 8-byte aligned")
	var hdr map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &hdr), "header is plain JSON")
	assert.Contains(t, string(hdr["w"]), `"dtype":"F32","shape":[2,3],"data_offsets":[`)

	got, gotMeta, err := DecodeSafetensors(b, "rt")
	require.NoError(t, err)
	assertSameTensors(t, ts, got)
	assert.Equal(t, meta["note"], gotMeta["note"])
	assert.Len(t, gotMeta[ChunkedChecksumKey], 64)

	// Non-contiguous input is written in logical order.
	p := filepath.Join(t.TempDir(), "x.safetensors")
	require.NoError(t, SaveSafetensors(p, map[string]*tensor.Tensor{"w": ts["w"]}, nil))
	got, _, err = LoadSafetensors(p)
	require.NoError(t, err)
	assert.Equal(t, ts["w"].F32(), got["w"].F32())

	_, err = EncodeSafetensors(map[string]*tensor.Tensor{"__metadata__": ts["w"]}, nil)
	require.ErrorIs(t, err, ErrUnsupported)
}

// foreign builds a safetensors file the way other writers do: no checksum,
// assorted dtypes.
func foreign(t *testing.T, entries map[string]any, data []byte) []byte {
	js, err := json.Marshal(entries)
	require.NoError(t, err)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(js)))
	b.Write(js)
	b.Write(data)
	return b.Bytes()
}

func TestSafetensorsForeignDTypes(t *testing.T) {
	var data bytes.Buffer
	binary.Write(&data, binary.LittleEndian, []uint16{0x3c00, 0xc000, 0x0001, 0x7c00}) // F16: 1, -2, 2^-24, +Inf
	binary.Write(&data, binary.LittleEndian, []uint16{0x3f80, 0x4049})                 // BF16: 1, 3.140625
	binary.Write(&data, binary.LittleEndian, []int64{-5, 1 << 40})                     // I64
	data.Write([]byte{1, 0})                                                           // BOOL
	b := foreign(t, map[string]any{
		"__metadata__": map[string]string{"format": "pt"},
		"h":            map[string]any{"dtype": "F16", "shape": []int{4}, "data_offsets": []int{0, 8}},
		"bf":           map[string]any{"dtype": "BF16", "shape": []int{2}, "data_offsets": []int{8, 12}},
		"n":            map[string]any{"dtype": "I64", "shape": []int{2, 1}, "data_offsets": []int{12, 28}},
		"m":            map[string]any{"dtype": "BOOL", "shape": []int{2}, "data_offsets": []int{28, 30}},
	}, data.Bytes())
	ts, meta, err := DecodeSafetensors(b, "foreign")
	require.NoError(t, err)
	assert.Equal(t, "pt", meta["format"])
	assert.Equal(t, []float32{1, -2, 1.0 / (1 << 24), float32(math.Inf(1))}, ts["h"].F32())
	assert.Equal(t, []float32{1, 3.140625}, ts["bf"].F32())
	assert.Equal(t, tensor.Int64, ts["n"].DType(), "I64 loads as int64 (torch's long)")
	assert.Equal(t, []int64{-5, 1 << 40}, ts["n"].I64())
	assert.Equal(t, []int{2, 1}, ts["n"].Shape())
	assert.Equal(t, []float64{1, 0}, ts["m"].F64())
}

func TestSafetensorsMalformed(t *testing.T) {
	ent := func(dtype string, shape []int, off []int) map[string]any {
		return map[string]any{"dtype": dtype, "shape": shape, "data_offsets": off}
	}
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
		is   error
	}{
		{"short", []byte{1, 2}, "too short", ErrCorrupt},
		{"huge header", huge, "exceeds the", ErrCorrupt},
		{"header past end", append([]byte{100, 0, 0, 0, 0, 0, 0, 0}, '{', '}'), "truncated", ErrCorrupt},
		{"not object", append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, '[', ']'), "start with '{'", ErrCorrupt},
		{"bad json", append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, '{', 'x'), "header JSON", ErrCorrupt},
		{"meta not strings", foreign(t, map[string]any{"__metadata__": map[string]int{"a": 1}}, nil), "__metadata__", ErrCorrupt},
		{"dtype", foreign(t, map[string]any{"x": ent("F8_E4M3", []int{1}, []int{0, 1})}, []byte{0}), "F8_E4M3", ErrUnsupported},
		{"offsets past end", foreign(t, map[string]any{"x": ent("F32", []int{2}, []int{0, 8})}, []byte{0, 0, 0, 0}), "outside the 4 data bytes", ErrCorrupt},
		{"shape vs offsets", foreign(t, map[string]any{"x": ent("F32", []int{3}, []int{0, 8})}, make([]byte, 8)), "does not fill", ErrCorrupt},
		{"negative dim", foreign(t, map[string]any{"x": ent("F32", []int{-1, -2}, []int{0, 8})}, make([]byte, 8)), "does not fill", ErrCorrupt},
		{"zero then negative dim", foreign(t, map[string]any{"x": ent("F32", []int{0, -1}, []int{0, 0})}, nil), "does not fill", ErrCorrupt},
		{"negative after zeros", foreign(t, map[string]any{"x": ent("U8", []int{3, 0, 0, -7}, []int{0, 0})}, nil), "does not fill", ErrCorrupt},
		{"overflow shape", foreign(t, map[string]any{"x": ent("F32", []int{1 << 40, 1 << 40}, []int{0, 8})}, make([]byte, 8)), "does not fill", ErrCorrupt},
		{"hole", foreign(t, map[string]any{"x": ent("U8", []int{1}, []int{1, 2})}, make([]byte, 2)), "hole or overlap", ErrCorrupt},
		{"overlap", foreign(t, map[string]any{"x": ent("U8", []int{2}, []int{0, 2}), "y": ent("U8", []int{1}, []int{1, 2})}, make([]byte, 2)), "hole or overlap", ErrCorrupt},
		{"trailing", foreign(t, map[string]any{"x": ent("U8", []int{1}, []int{0, 1})}, make([]byte, 2)), "cover 1 data bytes", ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeSafetensors(tc.in, "bad.safetensors")
			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), "bad.safetensors")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Every single-byte corruption and every truncation of a checkpoint file is
// detected. (A plain safetensors file is verified when it carries the
// checksum key; a flip inside that key's name makes it look like a foreign
// file, which is why checkpoints additionally require the key.)
func TestCheckpointDetectsEveryCorruption(t *testing.T) {
	c := &Checkpoint{Epoch: 1, Step: 2, Model: sampleTensors(), Meta: map[string]string{"k": "v"}}
	var buf bytes.Buffer
	require.NoError(t, c.Write(&buf))
	b := buf.Bytes()
	_, err := Decode(b, "ok")
	require.NoError(t, err)
	for i := range b {
		for _, mask := range []byte{0x01, 0x20, 0x80} {
			cb := bytes.Clone(b)
			cb[i] ^= mask
			_, err := Decode(cb, "flip.safetensors")
			if err == nil {
				t.Fatalf("flipping byte %d of %d (mask %#x) went unnoticed", i, len(b), mask)
			}
			require.Contains(t, err.Error(), "flip.safetensors")
		}
	}
	for n := range len(b) {
		_, err := Decode(b[:n], "cut.safetensors")
		require.ErrorIs(t, err, ErrCorrupt, "truncated to %d bytes", n)
		require.Contains(t, err.Error(), "cut.safetensors")
	}
	// Plain safetensors: data and digest corruption are caught too.
	sb, err := EncodeSafetensors(sampleTensors(), nil)
	require.NoError(t, err)
	for _, i := range []int{len(sb) - 1, bytes.Index(sb, []byte(ChunkedChecksumKey)) + len(ChunkedChecksumKey) + 5} {
		cb := bytes.Clone(sb)
		cb[i] ^= 1
		_, _, err := DecodeSafetensors(cb, "x")
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), "checksum mismatch")
	}
}

func TestWriteFileAtomicFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	boom := errors.New("disk on fire")
	err := WriteFileAtomic(p, func(w io.Writer) error {
		w.Write([]byte("partial new contents"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "temporary file removed")
}

// TestLoadZeroNegativeShape is issue 17's bar: a checkpoint whose header
// gives a tensor the shape [0,-1] (checksum recomputed, as whoever planted
// it would do) is an error from Load, and from the Manager that prunes and
// resumes over it, never a panic.
func TestLoadZeroNegativeShape(t *testing.T) {
	ck := emptyTensorCheckpoint(t)
	c, err := Decode(ck, "good")
	require.NoError(t, err, "the unmodified file loads")
	assert.Equal(t, []int{0, 3}, c.Model["empty"].Shape())

	for _, shape := range []string{"[0,-1]", "[-1,0]", "[0,0,-9]"} {
		t.Run(shape, func(t *testing.T) {
			dir := t.TempDir()
			m, err := NewManager(dir, Keep(1))
			require.NoError(t, err)
			planted := m.Path(1, 1)
			require.NoError(t, os.WriteFile(planted, replaceShape(t, ck, "[0,3]", shape), 0o644))

			_, err = Load(planted)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), planted)
			assert.Contains(t, err.Error(), "does not fill")

			_, err = m.Latest()
			require.ErrorIs(t, err, ErrNotFound)
			p, err := m.Save(fullCheckpoint(2, 2)) // prunes over the planted file
			require.NoError(t, err)
			f, err := m.Latest()
			require.NoError(t, err)
			assert.Equal(t, p, f.Path)
		})
	}
}
