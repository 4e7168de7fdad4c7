package tcp

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"slices"
	"time"
)

// MonitoredBarrier is a barrier through rank 0 that, when some ranks do not
// arrive within timeout, fails on every rank that did with an error naming
// the missing ones (torch's monitored_barrier). It does not fail the group.
func (g *tcpGroup) MonitoredBarrier(ctx context.Context, timeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if timeout <= 0 {
		timeout = g.timeout
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), time.Millisecond))
	}
	o := &tcpOp{name: "monitored_barrier", desc: opDesc{coll: collMonitoredBarrier}, soft: true}
	// Rank 0 decides at timeout (its own timer); the op's deadline leaves
	// time to tell the others.
	o.timeout = timeout + min(timeout, 5*time.Second) + time.Second
	o.run = func(o *tcpOp) error { return g.monitoredBarrier(o, timeout) }
	return g.submit(o).Wait(ctx)
}

func (g *tcpGroup) monitoredBarrier(o *tcpOp, timeout time.Duration) error {
	n := g.size
	if n == 1 {
		return nil
	}
	verdict := make([]byte, n) // 1 = did not arrive
	if g.rank != 0 {
		g.send(o, 0, 0, 0, nil)
		err := g.await(o, g.recv(o, 0, 1, 0, verdict))
		if err != nil {
			if errors.Is(err, backend.ErrTimeout) {
				return &peerFault{kind: backend.ErrTimeout, peers: []int{0},
					detail: fmt.Sprintf("rank 0 did not release the barrier within %v", o.timeout)}
			}
			return err
		}
		return verdictFault(verdict, timeout)
	}
	arrivals := make([]*xfer, n)
	for j := 1; j < n; j++ {
		arrivals[j] = g.recv(o, j, 0, 0, []byte{})
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for pendingArrivals(arrivals) > 0 {
		select {
		case x := <-g.events:
			if x.op != o {
				continue
			}
			x.done = true
			o.pending--
			if x.err != nil {
				// A rank that has left counts as missing.
				j := slices.Index(arrivals, x)
				if j < 0 || !errors.Is(x.err, backend.ErrPeerFailed) || g.failure() != nil {
					return x.err
				}
				verdict[j] = 1
			}
		case <-g.failed:
			return g.cause.Load()
		case <-deadline.C:
			for j, x := range arrivals {
				if x != nil && !x.done {
					verdict[j] = 1
					g.peers[j].unpost(x.key)
					x.done = true
					o.pending--
				}
			}
		}
	}
	for j := 1; j < n; j++ {
		if verdict[j] == 0 {
			g.send(o, j, 1, 0, verdict)
		}
	}
	return verdictFault(verdict, timeout)
}

func pendingArrivals(xs []*xfer) int {
	n := 0
	for _, x := range xs {
		if x != nil && !x.done {
			n++
		}
	}
	return n
}

func verdictFault(verdict []byte, timeout time.Duration) error {
	var missing []int
	for j, v := range verdict {
		if v != 0 {
			missing = append(missing, j)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &peerFault{kind: backend.ErrTimeout, peers: missing,
		detail: fmt.Sprintf("%s did not reach the barrier within %v", backend.RankList(missing), timeout)}
}
