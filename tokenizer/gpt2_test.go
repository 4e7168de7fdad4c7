package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// fixture is testdata/tokenizer/gpt2_ids.json, written by
// scripts/gen_fixtures_bpe.sh with the npm package gpt-3-encoder.
type fixture struct {
	Source       string `json:"source"`
	SampleSHA256 string `json:"sample_sha256"`
	IDs          []int  `json:"ids"`
	Cases        []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	} `json:"cases"`
}

func readSample(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("../testdata/tokenizer/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newGPT2(t testing.TB) *GPT2 {
	t.Helper()
	g, err := NewGPT2()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGPT2MatchesIndependentEncoder(t *testing.T) {
	raw, err := os.ReadFile("../testdata/tokenizer/gpt2_ids.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	sample := readSample(t)
	sum := sha256.Sum256([]byte(sample))
	if got := hex.EncodeToString(sum[:]); got != fx.SampleSHA256 {
		t.Fatalf("sample.txt has sha256 %s, the fixture was made from %s: rerun scripts/gen_fixtures_bpe.sh", got, fx.SampleSHA256)
	}
	g := newGPT2(t)
	got, err := g.Encode(sample)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, fx.IDs); i >= 0 {
		t.Fatalf("sample: %d ids, %s has %d; first difference at id %d: got %v, want %v",
			len(got), fx.Source, len(fx.IDs), i, window(got, i), window(fx.IDs, i))
	}
	if len(fx.Cases) == 0 {
		t.Fatal("fixture has no cases")
	}
	for _, c := range fx.Cases {
		got, err := g.Encode(c.Text)
		if err != nil {
			t.Fatal(err)
		}
		if c.IDs == nil {
			c.IDs = []int{}
		}
		if !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
			t.Errorf("Encode(%q) = %v, %s gives %v", c.Text, got, fx.Source, c.IDs)
		}
	}
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func window(ids []int, i int) []int { return ids[max(i-3, 0):min(i+4, len(ids))] }

func TestDecode(t *testing.T) {
	g := newGPT2(t)
	sample := readSample(t)
	ids, err := g.Encode(sample)
	if err != nil {
		t.Fatal(err)
	}
	back, err := g.Decode(ids)
	if err != nil || back != sample {
		t.Fatalf("Decode(Encode(sample)) differs from the sample (err %v)", err)
	}

	hello, _ := g.Encode("Hello world")
	if !slices.Equal(hello, []int{15496, 995}) {
		t.Fatalf("Hello world = %v, GPT-2 gives [15496 995]", hello)
	}
	withEOT := append(append(slices.Clone(hello), GPT2EOT), hello...)
	if s, err := g.Decode(withEOT); err != nil || s != "Hello world<|endoftext|>Hello world" {
		t.Fatalf("Decode with EOT = %q, %v", s, err)
	}
	// The literal text is ordinary text (encode_ordinary), not id 50256.
	lit, _ := g.Encode("<|endoftext|>")
	if slices.Contains(lit, GPT2EOT) || len(lit) < 2 {
		t.Fatalf("Encode(\"<|endoftext|>\") = %v, want ordinary ids", lit)
	}

	for _, bad := range []int{-1, GPT2VocabSize, 1 << 20} {
		_, err := g.Decode([]int{15496, bad})
		if !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), "position 1") {
			t.Errorf("Decode with id %d: %v, want ErrToken naming position 1", bad, err)
		}
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	g := newGPT2(t)
	// Python: b"ab\xff\xfecd \xe2\x82".decode(errors="replace") is
	// "ab\ufffd\ufffdcd \ufffd": one U+FFFD per maximal invalid subsequence.
	got, err := g.Encode("ab\xff\xfecd \xe2\x82")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := g.Encode("ab\ufffd\ufffdcd \ufffd")
	if !slices.Equal(got, want) {
		t.Fatalf("invalid UTF-8 encodes to %v, its replaced text to %v", got, want)
	}
}

func TestAppendUint16(t *testing.T) {
	g := newGPT2(t)
	sample := readSample(t)
	ids, _ := g.Encode(sample)
	u16, err := g.AppendUint16([]uint16{GPT2EOT}, sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(u16) != len(ids)+1 || u16[0] != GPT2EOT {
		t.Fatalf("AppendUint16 gave %d ids, want %d after the EOT", len(u16), len(ids)+1)
	}
	for i, id := range ids {
		if int(u16[i+1]) != id {
			t.Fatalf("id %d: %d as uint16, %d as int", i, u16[i+1], id)
		}
	}
}

// TestChunksEncodeAsWhole cuts the sample at every point LastCut and Chunks
// may choose and checks that the halves encode to the whole's ids.
func TestChunksEncodeAsWhole(t *testing.T) {
	g := newGPT2(t)
	sample := readSample(t)
	whole, _ := g.Encode(sample)
	cuts := 0
	for i := 1; i < len(sample)-1; i++ {
		if !cutAt(sample, i) {
			continue
		}
		cuts++
		a, _ := g.Encode(sample[:i])
		b, _ := g.Encode(sample[i:])
		if !slices.Equal(append(a, b...), whole) {
			t.Fatalf("cut at byte %d (%q|%q) changes the ids", i, sample[max(i-8, 0):i], sample[i:min(i+8, len(sample))])
		}
	}
	if cuts < 50 {
		t.Fatalf("only %d cut points in the sample", cuts)
	}
	// The sample is a fair test: cutting at any line end would change ids.
	naiveBroken := false
	for i := 1; i < len(sample); i++ {
		if sample[i-1] == '\n' {
			a, _ := g.Encode(sample[:i])
			b, _ := g.Encode(sample[i:])
			naiveBroken = naiveBroken || !slices.Equal(append(a, b...), whole)
		}
	}
	if !naiveBroken {
		t.Fatal("cutting after every line end keeps the ids: the sample does not exercise LastCut")
	}

	for _, size := range []int{1, 7, 64, 300, len(sample)} {
		chunks := Chunks(sample, size)
		if strings.Join(chunks, "") != sample {
			t.Fatalf("size %d: chunks do not join to the sample", size)
		}
		var ids []int
		for k, c := range chunks {
			if k < len(chunks)-1 && len(c) < size {
				t.Fatalf("size %d: chunk %d has %d bytes", size, k, len(c))
			}
			part, _ := g.Encode(c)
			ids = append(ids, part...)
		}
		if !slices.Equal(ids, whole) {
			t.Fatalf("size %d: %d chunks encode differently from the whole", size, len(chunks))
		}
	}
	if got := Chunks("nocutpointshere", 3); len(got) != 1 {
		t.Fatalf("a text without cut points gave %d chunks", len(got))
	}
	if got := Chunks("", 3); len(got) != 1 || got[0] != "" {
		t.Fatalf("Chunks of empty text = %q", got)
	}
}

func TestLastCutStaysValidWhenTextGrows(t *testing.T) {
	g := newGPT2(t)
	sample := readSample(t)
	whole, _ := g.Encode(sample)
	// Every prefix's LastCut must be a valid cut of the whole sample:
	// that is how cmd/tokenize cuts the text it has read so far.
	for n := 2; n <= len(sample); n += 5 {
		i := LastCut(sample[:n])
		if i == 0 {
			continue
		}
		if i >= n-1 {
			t.Fatalf("LastCut of %d bytes = %d", n, i)
		}
		a, _ := g.Encode(sample[:i])
		b, _ := g.Encode(sample[i:])
		if !slices.Equal(append(a, b...), whole) {
			t.Fatalf("LastCut(sample[:%d]) = %d changes the whole's ids", n, i)
		}
	}
	if LastCut([]byte("ab\ncd")) != 3 || LastCut("word word") != 4 || LastCut("ab \ncd") != 0 {
		t.Fatal("LastCut misses or invents a cut in a short text")
	}
}

// TestDELPathMatchesModule runs the encoder used for texts with DEL
// (del.go) on texts without it, where the module is right: same ids.
func TestDELPathMatchesModule(t *testing.T) {
	g := newGPT2(t)
	texts := []string{
		readSample(t), "", "Hello world", "  leading and trailing  ", "x\n\n\ny",
		// Ill-formed UTF-8: each maximal subpart becomes one U+FFFD.
		"ab\xff\xfecd \xe2\x82", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 beyond", "\xe0\x80\xaf overlong",
		"\xf0\x9f\x99 truncated emoji", "\xc3", "é\x80é", "\xe2\x82\xac€\xe2",
	}
	for _, s := range texts {
		ids, _, err := g.codec.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		if err := g.del.encode(s, func(id int) { got = append(got, id) }); err != nil {
			t.Fatal(err)
		}
		want := make([]int, len(ids))
		for i, id := range ids {
			want[i] = int(id)
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Errorf("%.40q: DEL path differs from the module at id %d: %v, module %v", s, i, window(got, i), window(want, i))
		}
	}
	// And the module really drops DEL, or this file is no longer needed.
	ids, _, _ := g.codec.Encode("a\x7fb")
	if len(ids) != 2 {
		t.Logf("the module now encodes DEL (%v): tokenizer/del.go's workaround may go", ids)
	}
	if got, _ := g.Encode("a\x7fb"); !slices.Equal(got, []int{64, 221, 65}) {
		t.Fatalf("Encode(a DEL b) = %v, GPT-2 gives [64 221 65]", got)
	}
}
