package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/goddp/goddp/tokenizer"
)

// input opens one source of text; name is how errors call it.
type input struct {
	name string
	open func() (readCloser, error)
}

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

type stats struct {
	docs, bytes, tokens int64
}

// tokenizeAll encodes inputs on workers goroutines and hands the ids to
// sink in input order. At most inflight pieces exist at once, read but not
// yet consumed by sink, which bounds memory to inflight*chunk bytes of text
// and their ids whatever the corpus size.
func tokenizeAll(ctx context.Context, tok *tokenizer.GPT2, inputs []input, sp splitter, workers, inflight int, sink func([]uint16) error) (stats, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan piece, workers)
	results := make(chan encoded, workers)
	slots := make(chan struct{}, inflight)
	var st stats

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
				st.docs++
			}
			st.bytes += int64(len(text))
			jobs <- piece{seq, text, docStart}
			seq++
			return nil
		}
		for _, in := range inputs {
			err := func() error {
				rc, err := in.open()
				if err != nil {
					return err
				}
				defer rc.Close()
				return sp.split(rc, in.name)
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
				firstErr = fmt.Errorf("tokenize: %w", e.err)
			} else if err := sink(e.ids); err != nil {
				firstErr = err
			} else {
				st.tokens += int64(len(e.ids))
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
