package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/goddp/goddp/tokenizer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type readCloser = io.ReadCloser

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", ".", "output directory (created if missing)")
	prefix := fs.String("prefix", "tokens", "shard name prefix: PREFIX_val_000000.bin, PREFIX_train_000001.bin, ...")
	shardSize := fs.Int("shard-size", 100_000_000, "tokens per training shard (llm.c's fineweb.py: 10^8)")
	valTokens := fs.Int("val-tokens", -1, "tokens in the validation shard 0 (default -shard-size; 0: no validation shard)")
	paragraphs := fs.Bool("paragraphs", false, "each blank-line-separated paragraph is a document (default: each input is one)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "goroutines encoding in parallel")
	chunk := fs.Int("chunk", 1<<20, "bytes of text encoded as one piece")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tokenize [flags] [FILE|GLOB|-]...   (no FILE, or -: standard input; .gz/.dz inputs are decompressed)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *valTokens < 0 {
		*valTokens = *shardSize
	}
	switch {
	case *shardSize <= 0 || *shardSize > 1<<31-1:
		fmt.Fprintf(stderr, "tokenize: -shard-size %d must be in 1..%d (llm.c's int32 token count)\n", *shardSize, 1<<31-1)
		return 2
	case *valTokens > 1<<31-1:
		fmt.Fprintf(stderr, "tokenize: -val-tokens %d must be at most %d\n", *valTokens, 1<<31-1)
		return 2
	case *workers <= 0 || *chunk <= 0:
		fmt.Fprintf(stderr, "tokenize: -workers %d and -chunk %d must be positive\n", *workers, *chunk)
		return 2
	case *prefix == "" || strings.ContainsRune(*prefix, filepath.Separator):
		fmt.Fprintf(stderr, "tokenize: -prefix %q must be a non-empty file name\n", *prefix)
		return 2
	}
	inputs, err := expandInputs(fs.Args(), stdin)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "tokenize: output directory: %v\n", err)
		return 1
	}
	tok, err := tokenizer.NewGPT2()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	w := &shardWriter{dir: *out, prefix: *prefix, valTokens: *valTokens, shardSize: *shardSize, log: stderr}
	start := time.Now()
	st, err := tokenizeAll(ctx, tok, inputs, splitter{chunk: *chunk, paragraphs: *paragraphs},
		*workers, 4**workers, w.add)
	if err == nil {
		err = w.close()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(stdout, "tokenize: %d inputs, %d documents, %d bytes -> %d tokens in %d shards of %s, %.1fs (%.0f tokens/s, %d workers)\n",
		len(inputs), st.docs, st.bytes, st.tokens, len(w.written), *out, secs, float64(st.tokens)/secs, *workers)
	if st.tokens > 0 && w.index <= 1 && *valTokens > 0 {
		fmt.Fprintf(stderr, "tokenize: warning: all %d tokens went to the validation shard (-val-tokens %d); no training shard\n", st.tokens, *valTokens)
	}
	return 0
}

// expandInputs turns the arguments into inputs: "-" (or none) is stdin, a
// pattern with glob characters must match at least one file, anything else
// is a file. A gzip stream (.gz, or dictd's .dz) is decompressed, whatever
// its name.
func expandInputs(args []string, stdin io.Reader) ([]input, error) {
	if len(args) == 0 {
		args = []string{"-"}
	}
	var inputs []input
	for _, a := range args {
		if a == "-" {
			inputs = append(inputs, input{"standard input", func() (readCloser, error) {
				return maybeGunzip(io.NopCloser(stdin), "standard input")
			}})
			continue
		}
		paths := []string{a}
		if strings.ContainsAny(a, "*?[") {
			m, err := filepath.Glob(a)
			if err != nil {
				return nil, fmt.Errorf("tokenize: pattern %q: %w", a, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("tokenize: pattern %q matches no file", a)
			}
			paths = m
		}
		for _, p := range paths {
			if st, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("tokenize: input: %w", err)
			} else if st.IsDir() {
				return nil, fmt.Errorf("tokenize: input %s is a directory; give its files, e.g. %s", p, filepath.Join(p, "*.txt"))
			}
			inputs = append(inputs, input{p, func() (readCloser, error) {
				f, err := os.Open(p)
				if err != nil {
					return nil, fmt.Errorf("tokenize: input: %w", err)
				}
				return maybeGunzip(f, p)
			}})
		}
	}
	return inputs, nil
}

// maybeGunzip decompresses rc if it starts with gzip's magic bytes.
func maybeGunzip(rc io.ReadCloser, name string) (io.ReadCloser, error) {
	br := bufio.NewReader(rc)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		rc.Close()
		return nil, fmt.Errorf("tokenize: reading %s: %w", name, err)
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return struct {
			io.Reader
			io.Closer
		}{br, rc}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("tokenize: %s: gzip: %w", name, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{gzipReader{zr}, rc}, nil
}

// gzipReader says "gzip" in decompression errors (the splitter adds the
// input's name).
type gzipReader struct{ r io.Reader }

func (g gzipReader) Read(p []byte) (int, error) {
	k, err := g.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("gzip: %w", err)
	}
	return k, err
}
