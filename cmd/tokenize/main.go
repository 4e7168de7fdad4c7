package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/goddp/goddp/internal/tokenshards"
	"github.com/goddp/goddp/tokenizer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

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
	switch { // the command's names for what Config.Validate checks
	case *shardSize <= 0 || *shardSize > 1<<31-1:
		fmt.Fprintf(stderr, "tokenize: -shard-size %d must be in 1..%d (llm.c's int32 token count)\n", *shardSize, 1<<31-1)
		return 2
	case *valTokens > 1<<31-1:
		fmt.Fprintf(stderr, "tokenize: -val-tokens %d must be at most %d\n", *valTokens, 1<<31-1)
		return 2
	case *workers <= 0 || *chunk <= 0:
		fmt.Fprintf(stderr, "tokenize: -workers %d and -chunk %d must be positive\n", *workers, *chunk)
		return 2
	}
	cfg := tokenshards.Config{Dir: *out, Prefix: *prefix, ValTokens: *valTokens, ShardSize: *shardSize,
		Paragraphs: *paragraphs, Workers: *workers, Chunk: *chunk, Log: stderr}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "tokenize: -prefix: %v\n", err)
		return 2
	}
	inputs, err := tokenshards.Inputs(fs.Args(), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "tokenize:", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "tokenize: output directory: %v\n", err)
		return 1
	}
	tok, err := tokenizer.NewGPT2()
	if err != nil {
		fmt.Fprintln(stderr, "tokenize:", err)
		return 1
	}
	start := time.Now()
	res, err := tokenshards.Write(ctx, tok, inputs, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "tokenize:", err)
		return 1
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(stdout, "tokenize: %d inputs, %d documents, %d bytes -> %d tokens in %d shards of %s, %.1fs (%.0f tokens/s, %d workers)\n",
		len(inputs), res.Docs, res.Bytes, res.Tokens, len(res.Shards), *out, secs, float64(res.Tokens)/secs, *workers)
	if res.Tokens > 0 && *valTokens > 0 && len(res.Shards) == 1 {
		fmt.Fprintf(stderr, "tokenize: warning: all %d tokens went to the validation shard (-val-tokens %d); no training shard\n", res.Tokens, *valTokens)
	}
	return 0
}
