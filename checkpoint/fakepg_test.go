package checkpoint

import (
	"context"
	"sync"

	"goddp/comm"
)

// fakeHub is an in-memory process group shared by goroutine "ranks": each
// collective is matched across ranks by its sequence number, as in a real
// backend.
type fakeHub struct {
	mu   sync.Mutex
	size int
	ops  map[int]*fakeOp
}

type fakeOp struct {
	arrived  int
	all      chan struct{} // closed when every rank has arrived
	rootData []byte
	rootSet  chan struct{}
}

func newFakeGroup(size int) []*fakePG {
	h := &fakeHub{size: size, ops: map[int]*fakeOp{}}
	pgs := make([]*fakePG, size)
	for r := range pgs {
		pgs[r] = &fakePG{hub: h, rank: r}
	}
	return pgs
}

func (h *fakeHub) op(seq int) *fakeOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.ops[seq]
	if !ok {
		o = &fakeOp{all: make(chan struct{}), rootSet: make(chan struct{})}
		h.ops[seq] = o
	}
	return o
}

func (h *fakeHub) arrive(o *fakeOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o.arrived++
	if o.arrived == h.size {
		close(o.all)
	}
}

type fakePG struct {
	hub  *fakeHub
	rank int
	seq  int
}

type fakeWork struct{ done chan struct{} }

func (w fakeWork) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w fakeWork) IsCompleted() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (p *fakePG) Rank() int       { return p.rank }
func (p *fakePG) Size() int       { return p.hub.size }
func (p *fakePG) Backend() string { return "fake" }
func (p *fakePG) Close() error    { return nil }

func (p *fakePG) AllReduce(comm.Buffer, comm.ReduceOp) comm.Work {
	return comm.DoneWork{Err: comm.ErrUnsupported}
}

func (p *fakePG) Broadcast(buf comm.Buffer, root int) comm.Work {
	p.seq++
	o := p.hub.op(p.seq)
	p.hub.arrive(o)
	w := fakeWork{done: make(chan struct{})}
	if p.rank == root {
		o.rootData = append([]byte(nil), buf.Bytes...)
		close(o.rootSet)
		close(w.done)
		return w
	}
	go func() {
		<-o.rootSet
		copy(buf.Bytes, o.rootData)
		close(w.done)
	}()
	return w
}

func (p *fakePG) Barrier() comm.Work {
	p.seq++
	o := p.hub.op(p.seq)
	p.hub.arrive(o)
	return fakeWork{done: o.all}
}

var _ comm.ProcessGroup = (*fakePG)(nil)
