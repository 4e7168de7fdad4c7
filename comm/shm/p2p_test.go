package shm

import (
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShmSendRecv(t *testing.T) {
	t.Setenv("GODDP_SHM_P2P_RING", "4K") // messages larger than the ring stream through it
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, g backend.ProcessGroup) error
	}{
		{"ring-exchange", func(ctx context.Context, g backend.ProcessGroup) error {
			// Everyone sends before receiving: no deadlock, even for
			// messages 25x the ring.
			r, n := g.Rank(), g.Size()
			for _, elems := range []int{0, 1, 7, 1000, 25000} {
				out := commtest.Input(backend.Float32, r, elems)
				in := commtest.MakeBuffer(backend.Float32, make([]float64, elems))
				ws := backend.Send(g, out, (r+1)%n, elems)
				if err := backend.Recv(g, in, (r+n-1)%n, elems).Wait(ctx); err != nil {
					return err
				}
				if err := ws.Wait(ctx); err != nil {
					return err
				}
				want := commtest.Input(backend.Float32, (r+n-1)%n, elems)
				if string(in.Bytes) != string(want.Bytes) {
					return fmt.Errorf("%d elements from rank %d: wrong data", elems, (r+n-1)%n)
				}
			}
			return nil
		}},
		{"tags-out-of-order", func(ctx context.Context, g backend.ProcessGroup) error {
			switch g.Rank() {
			case 0:
				for tag := 1; tag <= 3; tag++ {
					if err := backend.Send(g, backend.Int64s([]int64{int64(tag), int64(10 * tag)}), 1, tag).Wait(ctx); err != nil {
						return err
					}
				}
				// Two messages with one tag arrive in order.
				backend.Send(g, backend.Int64s([]int64{7, 1}), 1, 7)
				return backend.Send(g, backend.Int64s([]int64{7, 2}), 1, 7).Wait(ctx)
			case 1:
				for _, tag := range []int{3, 1, 2, 7, 7} {
					x := make([]int64, 2)
					if err := backend.Recv(g, backend.Int64s(x), 0, tag).Wait(ctx); err != nil {
						return err
					}
					if x[0] != int64(tag) {
						return fmt.Errorf("tag %d got %v", tag, x)
					}
				}
			}
			return nil
		}},
		{"interleaved-with-collectives", func(ctx context.Context, g backend.ProcessGroup) error {
			// A receive posted before a collective does not hold it up.
			r := g.Rank()
			x := make([]float64, 300)
			var w backend.Work
			if r == 1 {
				w = backend.Recv(g, backend.Float64s(x), 0, 0)
			}
			y := []float64{1}
			if err := g.AllReduce(backend.Float64s(y), backend.Sum).Wait(ctx); err != nil {
				return err
			}
			if r == 0 {
				for i := range x {
					x[i] = float64(i)
				}
				return backend.Send(g, backend.Float64s(x), 1, 0).Wait(ctx)
			}
			if r == 1 {
				if err := w.Wait(ctx); err != nil {
					return err
				}
				if x[299] != 299 {
					return fmt.Errorf("got %v", x[299])
				}
			}
			return nil
		}},
		{"size-mismatch", func(ctx context.Context, g backend.ProcessGroup) error {
			switch g.Rank() {
			case 0:
				backend.Send(g, backend.Float32s(make([]float32, 3)), 1, 0)
				return backend.Send(g, backend.Float32s([]float32{5}), 1, 0).Wait(ctx)
			case 1:
				err := backend.Recv(g, backend.Float32s(make([]float32, 4)), 0, 0).Wait(ctx)
				if !errors.Is(err, backend.ErrBadArgument) {
					return fmt.Errorf("want a size error, got %v", err)
				}
				// The stream is still in step.
				x := []float32{0}
				if err := backend.Recv(g, backend.Float32s(x), 0, 0).Wait(ctx); err != nil || x[0] != 5 {
					return fmt.Errorf("after a mismatch: %v %v", x, err)
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for r, err := range shmWorld(t, 3, 10*time.Second, tc.run) {
				require.NoError(t, err, "rank %d", r)
			}
		})
	}
}

func TestShmRecvTimeoutAndClose(t *testing.T) {
	errs := shmWorld(t, 2, 200*time.Millisecond, func(ctx context.Context, g backend.ProcessGroup) error {
		if g.Rank() == 0 {
			time.Sleep(time.Second) // sends nothing; closes last
			return nil
		}
		err := backend.Recv(g, backend.Float32s(make([]float32, 1)), 0, 9).Wait(ctx)
		var oe *backend.OpError
		if !errors.As(err, &oe) || !errors.Is(err, backend.ErrTimeout) || oe.Op != "recv" || len(oe.Peers) != 1 || oe.Peers[0] != 0 {
			return fmt.Errorf("want a recv timeout naming rank 0, got %v", err)
		}
		// That stream is unusable now; and a pending receive fails when
		// the group closes.
		w := backend.Recv(g, backend.Float32s(make([]float32, 1)), 0, 0)
		time.Sleep(10 * time.Millisecond)
		g.Close()
		if err := w.Wait(ctx); !errors.Is(err, backend.ErrClosed) && !errors.Is(err, backend.ErrPeerFailed) {
			return fmt.Errorf("want closed or unusable, got %v", err)
		}
		if err := backend.Send(g, backend.Float32s(make([]float32, 1)), 0, 0).Wait(ctx); !errors.Is(err, backend.ErrClosed) {
			return fmt.Errorf("send after Close: %v", err)
		}
		return nil
	})
	for r, err := range errs {
		assert.NoError(t, err, "rank %d", r)
	}
}
