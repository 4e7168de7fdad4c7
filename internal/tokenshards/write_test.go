package tokenshards

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tokenizer"
)

func text(name, s string) Input {
	return Input{name, func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil }}
}

func TestWriteDocuments(t *testing.T) {
	tok, err := tokenizer.NewGPT2()
	if err != nil {
		t.Fatal(err)
	}
	enc := func(s string) []uint16 {
		ids, _ := tok.AppendUint16([]uint16{tokenizer.GPT2EOT}, s)
		return ids
	}
	// A long line with no cut point (no spaces between letters, no line
	// ends) stays whole however small Chunk is; CRLF blank lines end
	// paragraphs; an empty input makes no document.
	long := strings.Repeat("abc,", 500)
	in := []Input{text("a", "one two\r\n\r\n"+long+"\n \r\n\nlast words"), text("empty", ""), text("b", "x y")}
	cases := []struct {
		paragraphs bool
		want       []uint16
	}{
		{false, slices.Concat(enc("one two\r\n\r\n"+long+"\n \r\n\nlast words"), enc("x y"))},
		{true, slices.Concat(enc("one two"), enc(long), enc("last words"), enc("x y"))},
	}
	for _, c := range cases {
		dir := t.TempDir()
		res, err := Write(context.Background(), tok, in, Config{Dir: dir, Prefix: "p", ValTokens: 5, ShardSize: 7,
			Paragraphs: c.paragraphs, Workers: 2, Chunk: 3})
		if err != nil {
			t.Fatal(err)
		}
		var got []uint16
		for k, s := range res.Shards {
			f, err := data.OpenTokenFile(s.Path, data.TokensLLMC, tokenizer.GPT2VocabSize)
			if err != nil {
				t.Fatal(err)
			}
			if f.Len() != s.Tokens || (k == 0 && s.Tokens != 5) || (k > 0 && k < len(res.Shards)-1 && s.Tokens != 7) {
				t.Fatalf("paragraphs %v: shard %d (%s) has %d tokens, reported %d", c.paragraphs, k, s.Path, f.Len(), s.Tokens)
			}
			got = append(got, f.Tokens()...)
			f.Close()
		}
		if !slices.Equal(got, c.want) || res.Tokens != int64(len(c.want)) {
			t.Fatalf("paragraphs %v: %d tokens (reported %d), want %d", c.paragraphs, len(got), res.Tokens, len(c.want))
		}
		if wantDocs := map[bool]int64{false: 2, true: 4}[c.paragraphs]; res.Docs != wantDocs {
			t.Fatalf("paragraphs %v: %d documents, want %d", c.paragraphs, res.Docs, wantDocs)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Dir: ".", Prefix: "p", ValTokens: 0, ShardSize: 10, Workers: 1, Chunk: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.ShardSize = 0 }, "ShardSize 0"},
		{func(c *Config) { c.ShardSize = 1 << 31 }, "ShardSize 2147483648"},
		{func(c *Config) { c.ValTokens = -1 }, "ValTokens -1"},
		{func(c *Config) { c.Workers = 0 }, "Workers 0"},
		{func(c *Config) { c.Chunk = -1 }, "Chunk -1"},
		{func(c *Config) { c.Prefix = "a/b" }, `Prefix "a/b"`},
		{func(c *Config) { c.Prefix = "" }, `Prefix ""`},
	} {
		cfg := good
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", cfg, err, c.want)
		}
		if _, err := Write(context.Background(), nil, nil, cfg); err == nil {
			t.Errorf("Write accepted %+v", cfg)
		}
	}
}
