package tokenshards

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/goddp/goddp/data"
)

// shardWriter cuts the token stream into llm.c's shards: shard 0, the
// validation shard, takes the first valTokens tokens, and every later
// shard shardSize tokens (the last whatever is left). A document may
// straddle two shards, as in llm.c's fineweb.py.
type shardWriter struct {
	dir, prefix string
	valTokens   int
	shardSize   int
	log         io.Writer

	index   int // the shard being filled
	buf     []uint16
	written []Shard
}

func (w *shardWriter) limit() int {
	if w.index == 0 {
		return w.valTokens
	}
	return w.shardSize
}

func (w *shardWriter) path() string {
	split := "train"
	if w.index == 0 {
		split = "val"
	}
	return filepath.Join(w.dir, fmt.Sprintf("%s_%s_%06d.bin", w.prefix, split, w.index))
}

// add appends ids, writing every shard they fill.
func (w *shardWriter) add(ids []uint16) error {
	for len(ids) > 0 {
		if w.limit() == 0 { // -val-tokens 0: no validation shard
			w.index++
			continue
		}
		n := min(len(ids), w.limit()-len(w.buf))
		w.buf = append(w.buf, ids[:n]...)
		ids = ids[n:]
		if len(w.buf) == w.limit() {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *shardWriter) flush() error {
	path := w.path()
	if err := data.WriteTokenFile(path, w.buf, data.TokensLLMC); err != nil {
		return fmt.Errorf("tokenshards: %w", err)
	}
	if w.log != nil {
		fmt.Fprintf(w.log, "wrote %s (%d tokens)\n", path, len(w.buf))
	}
	w.written = append(w.written, Shard{path, len(w.buf)})
	w.index++
	w.buf = w.buf[:0]
	return nil
}

// close writes the last, partly filled shard.
func (w *shardWriter) close() error {
	if len(w.buf) == 0 {
		return nil
	}
	return w.flush()
}
