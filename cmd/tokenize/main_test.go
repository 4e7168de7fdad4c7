package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tokenizer"
)

const samplePath = "../../testdata/tokenizer/sample.txt"

func readSample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func encode(t *testing.T, text string) []uint16 {
	t.Helper()
	tok, err := tokenizer.NewGPT2()
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.AppendUint16(nil, text)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// runOK runs the command and fails the test unless it exits 0.
func runOK(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr); code != 0 {
		t.Fatalf("tokenize %v: exit %d: %s", args, code, stderr.String())
	}
	return stdout.String()
}

// shards reads every shard in dir in name order (val first) and returns
// their names, sizes and concatenated tokens.
func shards(t *testing.T, dir string) (names []string, sizes []int, all []uint16) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*"))
	// By shard index (the name's last 10 bytes, 000000.bin): by name,
	// PREFIX_train_* would sort before PREFIX_val_000000.bin.
	slices.SortFunc(paths, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	for _, p := range paths {
		f, err := data.OpenTokenFile(p, data.TokensLLMC, tokenizer.GPT2VocabSize)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(p))
		sizes = append(sizes, f.Len())
		all = append(all, f.Tokens()...)
		f.Close()
	}
	return names, sizes, all
}

func TestTokenizeFilesIntoShards(t *testing.T) {
	if data.GPT2VocabSize != tokenizer.GPT2VocabSize {
		t.Fatalf("data.GPT2VocabSize %d, tokenizer.GPT2VocabSize %d", data.GPT2VocabSize, tokenizer.GPT2VocabSize)
	}
	sample := readSample(t)
	in := t.TempDir()
	second := "A second document.\n\nIt has two paragraphs, and ends without a line end."
	f1, f2 := filepath.Join(in, "a.txt"), filepath.Join(in, "b.txt")
	os.WriteFile(f1, []byte(sample), 0o644)
	os.WriteFile(f2, []byte(second), 0o644)
	want := append([]uint16{tokenizer.GPT2EOT}, encode(t, sample)...)
	want = append(append(want, tokenizer.GPT2EOT), encode(t, second)...)

	var ref []string
	for _, workers := range []string{"1", "3"} {
		for _, chunk := range []string{"16", "1000000"} {
			out := t.TempDir()
			// A small -chunk forces hundreds of cuts; the ids must not change.
			runOK(t, "", "-o", out, "-prefix", "s", "-shard-size", "100", "-val-tokens", "150",
				"-workers", workers, "-chunk", chunk, f1, filepath.Join(in, "b*.txt"))
			names, sizes, all := shards(t, out)
			if !slices.Equal(all, want) {
				t.Fatalf("workers %s chunk %s: %d tokens differ from EOT+sample+EOT+second (%d)", workers, chunk, len(all), len(want))
			}
			if names[0] != "s_val_000000.bin" || names[1] != "s_train_000001.bin" || sizes[0] != 150 {
				t.Fatalf("shards %v of %v tokens", names, sizes)
			}
			for k, n := range sizes[1 : len(sizes)-1] {
				if n != 100 {
					t.Fatalf("train shard %d has %d tokens, want 100", k+1, n)
				}
			}
			if ref == nil {
				ref = names
			} else if !slices.Equal(ref, names) {
				t.Fatalf("workers %s chunk %s: shards %v, first run %v", workers, chunk, names, ref)
			}
		}
	}
}

func TestTokenizeParagraphsStdinGzip(t *testing.T) {
	text := "\n\nFirst paragraph,\r\nline two.\n  \t\nSecond one.\n\n\n\n  Indented third,\nwith <|endoftext|> in it.\n"
	paras := []string{"First paragraph,\r\nline two.", "Second one.", "  Indented third,\nwith <|endoftext|> in it."}
	var want []uint16
	for _, p := range paras {
		want = append(append(want, tokenizer.GPT2EOT), encode(t, p)...)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	in := filepath.Join(t.TempDir(), "text.dz")
	os.WriteFile(in, gz.Bytes(), 0o644)

	for name, args := range map[string][]string{"stdin": {"-"}, "no args": nil, "gzip file": {in}} {
		out := t.TempDir()
		stdin := text
		runOK(t, stdin, append([]string{"-o", out, "-paragraphs", "-val-tokens", "0", "-chunk", "8"}, args...)...)
		names, _, all := shards(t, out)
		if !slices.Equal(all, want) {
			t.Fatalf("%s: got %v, want %v", name, all, want)
		}
		if len(names) != 1 || names[0] != "tokens_train_000001.bin" {
			t.Fatalf("%s: -val-tokens 0 wrote %v", name, names)
		}
	}
	// Without -paragraphs the whole input is one document.
	out := t.TempDir()
	runOK(t, text, "-o", out, "-val-tokens", "0")
	if _, _, all := shards(t, out); !slices.Equal(all, append([]uint16{tokenizer.GPT2EOT}, encode(t, text)...)) {
		t.Fatal("file mode changed the text")
	}
}

// TestTokenizeThenTrainWindows is the round trip: text -> shards ->
// data.OpenTokenSplits -> windows that are the tokens.
func TestTokenizeThenTrainWindows(t *testing.T) {
	sample := readSample(t)
	out := t.TempDir()
	runOK(t, sample+sample, "-o", out, "-prefix", "rt", "-shard-size", "300", "-val-tokens", "200")
	train, val, err := data.OpenTokenSplits(out, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	defer val.Close()
	want := append([]uint16{tokenizer.GPT2EOT}, encode(t, sample+sample)...)
	// Shard 0 holds want[:200]: windows at offsets 0,16,...; shard k ≥ 1
	// holds want[200+300(k-1):][:300].
	check := func(ds *data.TokenDataset, starts []int, sizes []int) {
		i := 0
		for k, s := range starts {
			for w := 0; w < (sizes[k]-1)/16; w++ {
				sm, err := ds.Get(i)
				if err != nil {
					t.Fatal(err)
				}
				off := s + 16*w
				for j := range 16 {
					if sm.Input.I64()[j] != int64(want[off+j]) || sm.Target.I64()[j] != int64(want[off+j+1]) {
						t.Fatalf("window %d (file %d, offset %d) differs from the tokens", i, k, off)
					}
				}
				i++
			}
		}
		if i != ds.Len() {
			t.Fatalf("checked %d windows of %d", i, ds.Len())
		}
	}
	check(val, []int{0}, []int{200})
	var starts, sizes []int
	for s := 200; s < len(want); s += 300 {
		starts = append(starts, s)
		sizes = append(sizes, min(300, len(want)-s))
	}
	if len(train.Paths()) != len(starts) {
		t.Fatalf("%d training shards, want %d", len(train.Paths()), len(starts))
	}
	check(train, starts, sizes)
}

func TestTokenizeErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{filepath.Join(dir, "missing.txt")}, 1, "missing.txt"},
		{[]string{filepath.Join(dir, "*.none")}, 1, "matches no file"},
		{[]string{dir}, 1, "is a directory"},
		{[]string{"-shard-size", "0"}, 2, "-shard-size 0"},
		{[]string{"-workers", "0"}, 2, "-workers 0"},
		{[]string{"-prefix", "a/b"}, 2, "-prefix"},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		code := run(context.Background(), append([]string{"-o", t.TempDir()}, c.args...), strings.NewReader("x"), &bytes.Buffer{}, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want exit %d saying %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
	// A corrupt gzip input names itself.
	bad := filepath.Join(dir, "bad.gz")
	os.WriteFile(bad, []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3}, 0o644)
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-o", t.TempDir(), bad}, nil, &bytes.Buffer{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "bad.gz") || !strings.Contains(stderr.String(), "gzip") {
		t.Errorf("corrupt gzip: exit %d, %q", code, stderr.String())
	}
	// An output that cannot be written names the shard.
	out := filepath.Join(dir, "ro")
	os.MkdirAll(out, 0o555)
	if os.Getuid() != 0 { // root writes anyway
		stderr.Reset()
		if code := run(context.Background(), []string{"-o", out}, strings.NewReader("text"), &bytes.Buffer{}, &stderr); code != 1 ||
			!strings.Contains(stderr.String(), "tokens_val_000000.bin") {
			t.Errorf("read-only output: exit %d, %q", code, stderr.String())
		}
	}
	// A shard that cannot be written is named, whoever runs the test: here
	// a directory stands where the training shard should go.
	out = t.TempDir()
	os.Mkdir(filepath.Join(out, "tokens_train_000001.bin"), 0o755)
	stderr.Reset()
	if code := run(context.Background(), []string{"-o", out, "-shard-size", "10", samplePath}, nil, &bytes.Buffer{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "WriteTokenFile "+filepath.Join(out, "tokens_train_000001.bin")) {
		t.Errorf("unwritable shard: exit %d, %q", code, stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	// A cancelled context stops the command.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stderr.Reset()
	if code := run(ctx, []string{"-o", t.TempDir(), samplePath}, nil, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), "canceled") {
		t.Errorf("cancelled: exit %d, %q", code, stderr.String())
	}
}
