package ddp

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// JoinOption configures Join.
type JoinOption func(*joinConfig)

type joinConfig struct {
	divideByInitialWorldSize bool
	throwOnEarlyTermination  bool
}

// DivideByInitialWorldSize chooses the gradient divisor under Join: the
// initial world size (default true, as torch: ranks that joined count as
// contributing zero gradients) or the number of ranks still training.
func DivideByInitialWorldSize(on bool) JoinOption {
	return func(c *joinConfig) { c.divideByInitialWorldSize = on }
}

// ThrowOnEarlyTermination makes every rank fail with ErrJoinedEarly as soon
// as one rank runs out of inputs, instead of shadowing it (default false).
func ThrowOnEarlyTermination(on bool) JoinOption {
	return func(c *joinConfig) { c.throwOnEarlyTermination = on }
}

type joinState struct {
	ctx        context.Context
	cfg        joinConfig
	lastActive []bool // ranks active in the last iteration that had any
	sawActive  bool
}

type joinFlags struct {
	active    int // ranks still training this iteration
	authority int // lowest active rank: root of this iteration's broadcasts
	sync      bool
}

// exchange is the per-iteration Join all-reduce: slot r says whether rank r
// still has inputs, the last slot counts ranks that will synchronise
// gradients in this iteration. Active ranks call it from Forward, joined
// ranks from the shadow loop, so the collectives line up.
func (j *joinState) exchange(d *DDP, active, sync bool) (joinFlags, error) {
	w := d.pg.Size()
	flags := make([]float32, w+1)
	if active {
		flags[d.pg.Rank()] = 1
		if sync {
			flags[w] = 1
		}
	}
	ctx, cancel := context.WithTimeout(j.ctx, d.cfg.timeout)
	defer cancel()
	if err := d.pg.AllReduce(backend.Float32s(flags), backend.Sum).Wait(ctx); err != nil {
		return joinFlags{}, fmt.Errorf("ddp: join all-reduce: %w", err)
	}
	f := joinFlags{authority: -1, sync: flags[w] > 0}
	act := make([]bool, w)
	for r := 0; r < w; r++ {
		if flags[r] > 0 {
			act[r] = true
			f.active++
			if f.authority < 0 {
				f.authority = r
			}
		}
	}
	if f.active > 0 {
		j.lastActive, j.sawActive = act, true
	}
	if j.cfg.throwOnEarlyTermination && f.active > 0 && f.active < w {
		var gone []int
		for r, a := range act {
			if !a {
				gone = append(gone, r)
			}
		}
		return f, fmt.Errorf("%w: ranks %v have no more inputs", ErrJoinedEarly, gone)
	}
	return f, nil
}

// Join runs fn, the rank's training loop over its own inputs, so that ranks
// with fewer inputs than others do not hang the job (torch's Join context
// manager with DDP as the Joinable). Every rank calls Join. While fn runs,
// each Forward first all-reduces a "still training" flag. When fn returns,
// this rank has joined: it keeps answering the others' collectives (the
// flag, the buffer broadcast and each bucket's all-reduce, with zero
// gradients) until every rank has joined; then all ranks take the final
// parameters and buffers from the last rank to join, so models agree.
//
// Inside fn, every Forward must be followed by a backward pass (run
// evaluation on d.Module() directly). If fn returns an error, Join returns it
// at once without shadowing: the other ranks then fail with a timeout.
func (d *DDP) Join(ctx context.Context, fn func() error, opts ...JoinOption) error {
	if d.closed {
		return ErrClosed
	}
	if d.join != nil {
		return fmt.Errorf("%w: Join is already active", ErrInvalidOption)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := joinConfig{divideByInitialWorldSize: true}
	for _, o := range opts {
		o(&cfg)
	}
	j := &joinState{ctx: ctx, cfg: cfg}
	d.join = j
	defer func() { d.join = nil }()
	if err := fn(); err != nil {
		return err
	}
	// Shadow the ranks that still train.
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ddp: join: %w", err)
		}
		f, err := j.exchange(d, false, false)
		if err != nil {
			return err
		}
		if f.active == 0 {
			break
		}
		if err := d.r.maybeRebuild(f.authority); err != nil {
			return err
		}
		if err := d.syncBuffers(f.authority); err != nil {
			return err
		}
		if f.sync {
			div := float64(d.pg.Size())
			if !cfg.divideByInitialWorldSize {
				div = float64(f.active)
			}
			if err := d.r.shadowBackward(div); err != nil {
				return fmt.Errorf("ddp: join: shadowing the gradient all-reduce: %w", err)
			}
		}
	}
	// Everyone has joined: adopt the last joiner's model.
	root := 0
	if j.sawActive {
		for r, a := range j.lastActive {
			if a {
				root = r // the highest rank among the last to join
			}
		}
	}
	state := modelState(d.model)
	ts := make([]*tensor.Tensor, len(state))
	for i, e := range state {
		ts[i] = e.t
	}
	bctx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	return broadcastState(bctx, d.pg, ts, root, fmt.Sprintf("join: broadcasting the final model from rank %d", root))
}
