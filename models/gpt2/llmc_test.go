package gpt2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLLMCRoundTrip: write → read → write gives the same bytes, for
// both versions, and the file's layout is llm.c's.
func TestLLMCRoundTrip(t *testing.T) {
	cfg := tinyConfig.Padded(64)
	for _, version := range []int{LLMCFloat32, LLMCBFloat16} {
		m := newTiny(t, cfg, 20)
		var first bytes.Buffer
		if err := m.WriteLLMC(&first, version); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "gpt2_tiny.bin")
		if err := os.WriteFile(path, first.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		m2, err := FromLLMC(path)
		if err != nil {
			t.Fatal(err)
		}
		if m2.Config != cfg {
			t.Fatalf("config from the header %+v, want %+v", m2.Config, cfg)
		}
		var second bytes.Buffer
		if err := m2.WriteLLMC(&second, version); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("version %d: the second write differs from the first", version)
		}
		if version == LLMCFloat32 {
			sameParams(t, m, m2)
		}
		checkLLMCLayout(t, first.Bytes(), m, version)
	}
}

// checkLLMCLayout reads a few values at the offsets llm.c's
// ParameterTensors give them: the header, wte's last padded row, and
// qkvw of layer 1 stored [3C, C] (torch's Linear layout), the transpose
// of c_attn's [C, 3C].
func checkLLMCLayout(t *testing.T, b []byte, m *Model, version int) {
	t.Helper()
	c := m.Config
	hdr := make([]int32, 8)
	binary.Read(bytes.NewReader(b), binary.LittleEndian, hdr)
	want := []int32{LLMCMagic, int32(version), int32(c.BlockSize), int32(c.VocabSize), int32(c.Layers), int32(c.Heads), int32(c.Embd), int32(c.PaddedVocab())}
	for i := range want {
		if hdr[i] != want[i] {
			t.Fatalf("header %v, want %v", hdr, want)
		}
	}
	size := eltSize(version)
	at := func(elem int) float32 {
		off := 1024 + elem*size
		if size == 2 {
			return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[off:])) << 16)
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
	}
	C, L, Vp := c.Embd, c.Layers, c.PaddedVocab()
	near := func(got, want float32) bool {
		if size == 4 {
			return got == want
		}
		return math.Abs(float64(got-want)) <= math.Abs(float64(want))/128
	}
	wte := m.Transformer.WTE.Weight.Value.F32()
	if g, w := at(Vp*C-1), wte[Vp*C-1]; !near(g, w) {
		t.Errorf("wte's last element %v, model %v", g, w)
	}
	// qkvw starts after wte, wpe, ln1w, ln1b.
	qkvw := Vp*C + c.BlockSize*C + 2*L*C
	o, i := 40, 5 // output row 40 of [3C, C], input column 5
	cattn := m.Block(1).Attn.CAttn.Weight.Value.F32()
	if g, w := at(qkvw+1*3*C*C+o*C+i), cattn[i*3*C+o]; !near(g, w) {
		t.Errorf("qkvw[1][%d][%d] = %v, want c_attn.weight[%d][%d] = %v", o, i, g, i, o, w)
	}
	total := 1024 + c.NumParams()*size
	if len(b) != total {
		t.Errorf("file of %d bytes, want %d", len(b), total)
	}
}

// TestLLMCErrors: a bad magic, version or size names the file and the
// problem; a header that is not the model's is refused.
func TestLLMCErrors(t *testing.T) {
	m := newTiny(t, tinyConfig, 21)
	var good bytes.Buffer
	if err := m.WriteLLMC(&good, LLMCFloat32); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	put := func(name string, edit func(b []byte) []byte) string {
		b := edit(bytes.Clone(good.Bytes()))
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	setInt := func(i int, v int32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4*i:], uint32(v)); return b }
	}
	for _, c := range []struct {
		file string
		edit func([]byte) []byte
		want string
	}{
		{"magic.bin", setInt(0, 20240327), "magic 20240327, want 20240326"},
		{"version.bin", setInt(1, 2), "version 2, want 3 (float32) or 5 (bfloat16)"},
		{"short.bin", func(b []byte) []byte { return b[:len(b)-4] }, "bytes, but its header"},
		{"long.bin", func(b []byte) []byte { return append(b, 0, 0, 0, 0) }, "bytes, but its header"},
		{"heads.bin", setInt(5, 3), "does not divide into 3 heads"},
		{"header.bin", func(b []byte) []byte { return b[:100] }, "reading the 1024-byte header"},
	} {
		p := put(c.file, c.edit)
		_, err := FromLLMC(p)
		if !errors.Is(err, ErrLLMC) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant ErrLLMC naming the file and %q", c.file, err, c.want)
		}
	}
	// A stream (no size to check first): truncation is found in place.
	err := m.ReadLLMC(bytes.NewReader(good.Bytes()[:good.Len()-8]), "pipe")
	if !errors.Is(err, ErrLLMC) || !strings.Contains(err.Error(), "pipe: truncated inside lnfb") {
		t.Errorf("truncated stream: %v", err)
	}
	// Another model's file.
	other := newTiny(t, Config{VocabSize: 50, BlockSize: 8, Layers: 3, Heads: 2, Embd: 16}, 1)
	err = other.ReadLLMC(bytes.NewReader(good.Bytes()), "tiny.bin")
	if !errors.Is(err, ErrLLMC) || !strings.Contains(err.Error(), "does not match the model's") {
		t.Errorf("3-layer model reading a 2-layer file: %v", err)
	}
	if err := m.WriteLLMC(&bytes.Buffer{}, 4); !errors.Is(err, ErrLLMC) {
		t.Errorf("writing version 4: %v", err)
	}
}
