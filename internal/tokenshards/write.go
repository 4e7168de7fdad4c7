package tokenshards

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/goddp/goddp/tokenizer"
)

type piece struct {
	seq      int
	text     []byte
	docStart bool
}

type encoded struct {
	seq int
	ids []uint16
	err error
}

// Config says where and how Write cuts the token stream into shards.
type Config struct {
	Dir    string // output directory, which must exist
	Prefix string // shard names: PREFIX_val_000000.bin, PREFIX_train_000001.bin, ...
	// ValTokens go to shard 0, the validation shard (0: none); ShardSize
	// to each later one, the last taking what is left.
	ValTokens, ShardSize int
	// Paragraphs makes each blank-line-separated paragraph a document;
	// otherwise each input is one.
	Paragraphs bool
	Workers    int       // goroutines encoding in parallel
	Chunk      int       // bytes of text encoded as one piece
	Log        io.Writer // one line per shard written; nil for none
}

// maxShard is llm.c's limit: its header counts tokens in an int32.
const maxShard = 1<<31 - 1

// Validate reports the first setting out of range, naming its field.
func (c Config) Validate() error {
	switch {
	case c.ShardSize <= 0 || c.ShardSize > maxShard:
		return fmt.Errorf("tokenshards: ShardSize %d must be in 1..%d (llm.c's int32 token count)", c.ShardSize, maxShard)
	case c.ValTokens < 0 || c.ValTokens > maxShard:
		return fmt.Errorf("tokenshards: ValTokens %d must be in 0..%d", c.ValTokens, maxShard)
	case c.Workers <= 0 || c.Chunk <= 0:
		return fmt.Errorf("tokenshards: Workers %d and Chunk %d must be positive", c.Workers, c.Chunk)
	case c.Prefix == "" || strings.ContainsAny(c.Prefix, `/\`):
		return fmt.Errorf("tokenshards: Prefix %q must be a non-empty file name", c.Prefix)
	}
	return nil
}

// Result is what Write did.
type Result struct {
	Docs, Bytes, Tokens int64   // documents, bytes of text and tokens (with the EOTs) written
	Shards              []Shard // in order: the validation shard first
}

// Shard is one file written.
type Shard struct {
	Path   string
	Tokens int
}

// Write tokenizes inputs, in order, with GPT-2's BPE and writes the token
// stream as llm.c shards in cfg.Dir (see the package documentation). On
// error the shards already complete stay; none is ever half written.
func Write(ctx context.Context, tok *tokenizer.GPT2, inputs []Input, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	w := &shardWriter{dir: cfg.Dir, prefix: cfg.Prefix, valTokens: cfg.ValTokens, shardSize: cfg.ShardSize, log: cfg.Log}
	res, err := tokenizeAll(ctx, tok, inputs, splitter{chunk: cfg.Chunk, paragraphs: cfg.Paragraphs},
		cfg.Workers, 4*cfg.Workers, w.add)
	if err == nil {
		err = w.close()
	}
	res.Shards = w.written
	return res, err
}

// tokenizeAll encodes inputs on workers goroutines and hands the ids to
// sink in input order. At most inflight pieces exist at once, read but not
// yet consumed by sink, which bounds memory to inflight*chunk bytes of text
// and their ids whatever the corpus size.
func tokenizeAll(ctx context.Context, tok *tokenizer.GPT2, inputs []Input, sp splitter, workers, inflight int, sink func([]uint16) error) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan piece, workers)
	results := make(chan encoded, workers)
	slots := make(chan struct{}, inflight)
	var st Result

	// Reader: cut the inputs into pieces, in order.
	readErr := make(chan error, 1)
	go func() {
		defer close(jobs)
		seq := 0
		sp.emit = func(text []byte, docStart bool) error {
			if ctx.Err() != nil { // stop reading at once, not when a slot is short
				return context.Cause(ctx)
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if docStart {
				st.Docs++
			}
			st.Bytes += int64(len(text))
			jobs <- piece{seq, text, docStart}
			seq++
			return nil
		}
		for _, in := range inputs {
			err := func() error {
				rc, err := in.Open()
				if err != nil {
					return err
				}
				defer rc.Close()
				return sp.split(rc, in.Name)
			}()
			if err != nil {
				readErr <- err
				return
			}
		}
		readErr <- nil
	}()

	// Workers: encode, EOT first at the start of a document (llm.c's
	// fineweb.py: every document is preceded by <|endoftext|>).
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				ids := make([]uint16, 0, len(p.text)/3+2)
				if p.docStart {
					ids = append(ids, tokenizer.GPT2EOT)
				}
				ids, err := tok.AppendUint16(ids, string(p.text))
				results <- encoded{p.seq, ids, err}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	// Consumer: put the pieces back in order and hand them to sink.
	pending := map[int]encoded{}
	next := 0
	var firstErr error
	for r := range results {
		if firstErr != nil {
			<-slots
			continue // drain, so that the workers and the reader finish
		}
		pending[r.seq] = r
		for {
			e, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-slots
			if e.err != nil {
				firstErr = fmt.Errorf("tokenshards: %w", e.err)
			} else if err := sink(e.ids); err != nil {
				firstErr = err
			} else {
				st.Tokens += int64(len(e.ids))
				continue
			}
			cancel(firstErr)
			for range pending { // their slots, never to be consumed
				<-slots
			}
			pending = nil
			break
		}
	}
	if err := <-readErr; err != nil && firstErr == nil && !errors.Is(err, context.Canceled) {
		firstErr = err
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return st, firstErr
}
