package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// FuzzCuts checks on arbitrary text that every point cutAt accepts splits
// it into halves whose ids, concatenated, are the ids of the whole; that
// the DEL path (del.go) agrees with the module where the module is right;
// and that Encode(Decode(ids)) gives the ids back.
func FuzzCuts(f *testing.F) {
	f.Add("The cat's\nhat, isn't it?\n\n  Yes it is.\r\nok")
	f.Add("a b\nc\td  e\n\n\nf 12 34\n'll\n's")
	f.Add("naïve café\n快速 🙂\n!!\n??")
	g, err := NewGPT2()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 512 {
			return
		}
		whole, err := g.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(s)-1; i++ {
			if !cutAt(s, i) {
				continue
			}
			a, _ := g.Encode(s[:i])
			b, _ := g.Encode(s[i:])
			if !slices.Equal(append(a, b...), whole) {
				t.Fatalf("cut at %d of %q changes the ids", i, s)
			}
		}
		if !strings.ContainsRune(s, del) {
			var viaDEL []int
			if err := g.del.encode(s, func(id int) { viaDEL = append(viaDEL, id) }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(viaDEL, whole) {
				t.Fatalf("%q: DEL path %v, module %v", s, viaDEL, whole)
			}
		}
		back, err := g.Decode(whole)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := g.Encode(back); !slices.Equal(r, whole) {
			t.Fatalf("%q: encode(decode(ids)) differs", s)
		}
	})
}
