package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/goddp/goddp/internal/tokenshards"
	"github.com/goddp/goddp/tokenizer"
)

// tokenizeOnce writes the token shards of the text files in list into dir
// (valTokens of them in the validation shard) unless dir already holds
// token files. One process per machine writes
// (LOCAL_RANK 0, into a temporary directory renamed to dir when whole);
// the others wait for dir to appear, at most GODDP_TIMEOUT (default 30
// minutes: GCIDE's 40 MB take about 20 s on two cores).
func tokenizeOnce(ctx context.Context, dir, list string, valTokens int, out io.Writer) error {
	if hasTokenFiles(dir) {
		return nil
	}
	if envInt("LOCAL_RANK", 0) != 0 {
		wait := 30 * time.Minute
		if d, err := time.ParseDuration(os.Getenv("GODDP_TIMEOUT")); err == nil && d > 0 {
			wait = d
		}
		deadline := time.Now().Add(wait)
		for !hasTokenFiles(dir) {
			if time.Now().After(deadline) {
				return fmt.Errorf("gpt2: waited %v for local rank 0 to tokenize %s into %s", wait, list, dir)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		return nil
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("gpt2: -tokenize: %s exists and holds no token files; name an empty or new -data", dir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), filepath.Base(dir)+".tokenizing-")
	if err != nil {
		return fmt.Errorf("gpt2: -tokenize: %w", err)
	}
	defer os.RemoveAll(tmp)
	var args []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			args = append(args, s)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("gpt2: -tokenize %q names no file", list)
	}
	inputs, err := tokenshards.Inputs(args, nil)
	if err != nil {
		return fmt.Errorf("gpt2: -tokenize: %w", err)
	}
	tok, err := tokenizer.NewGPT2()
	if err != nil {
		return err
	}
	// Each input is one document, shard 0 the validation shard, then
	// training shards of 10^8 tokens (llm.c's fineweb.py); cmd/tokenize
	// offers every setting.
	st, err := tokenshards.Write(ctx, tok, inputs, tokenshards.Config{Dir: tmp, Prefix: filepath.Base(filepath.Clean(dir)),
		ValTokens: valTokens, ShardSize: 100_000_000, Workers: runtime.GOMAXPROCS(0), Chunk: 1 << 20, Log: out})
	if err != nil {
		return fmt.Errorf("gpt2: -tokenize: %w", err)
	}
	os.Remove(dir) // an empty directory the user made
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("gpt2: -tokenize: %w", err)
	}
	fmt.Fprintf(out, "tokenized %d bytes into %d tokens in %s\n", st.Bytes, st.Tokens, dir)
	return nil
}

func hasTokenFiles(dir string) bool {
	m, err := filepath.Glob(filepath.Join(dir, "*.bin"))
	return err == nil && len(m) > 0
}
