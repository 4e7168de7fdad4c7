package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/cuda/sim"
)

func f32bytes(x []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x)) }

// The group issues its collectives in call order, as NCCL's communicator
// does: rank 0's device all-reduce waits on the device (its compute
// stream is held shut) while rank 0 calls a host all-reduce after it, and
// rank 1 calls its host all-reduce once its device one has completed.
// Issued as called, the host one waits behind the device one, so both
// ranks pair device with device and host with host. (Before, the host
// all-reduce went to the wrapped group at once and rank 0's host buffer
// was summed with rank 1's device buffer.)
func TestCollectivesIssueInCallOrder(t *testing.T) {
	errs := commtest.Run(commtest.NewGroups(2, commtest.WithTimeout(10*time.Second)), func(pg backend.ProcessGroup) error {
		r := pg.Rank()
		dev := sim.New(r)
		defer dev.Close()
		c := sim.NewCollectives(pg, dev, 10*time.Second)
		b, err := dev.Alloc(4)
		if err != nil {
			return err
		}
		defer b.Free()
		dev.Compute().CopyHtoD(b, 0, f32bytes([]float32{float32(r + 1)}))
		gate := make(chan struct{})
		if r == 0 {
			dev.Compute().Enqueue("gate", func() error { <-gate; return nil })
		}
		after := dev.NewEvent()
		after.Record(dev.Compute())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		wd, _ := c.AllReduceDevice(b, 0, 1, backend.Float32, backend.Sum, after)
		if r == 1 {
			// Rank 1's device all-reduce reaches the wrapped group first.
			if err := wd.Wait(ctx); err != nil {
				return err
			}
		}
		host := []float32{float32(10 * (r + 1))}
		wh := c.AllReduce(backend.Float32s(host), backend.Sum)
		close(gate)
		if err := errors.Join(wd.Wait(ctx), wh.Wait(ctx)); err != nil {
			return err
		}
		out := make([]float32, 1)
		dev.Compute().CopyDtoH(f32bytes(out), b, 0)
		if err := dev.Synchronize(); err != nil {
			return err
		}
		assert.Equal(t, []float32{3}, out, "rank %d: device buffer", r)
		assert.Equal(t, []float32{30}, host, "rank %d: host buffer", r)
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// Abort fails the device all-reduce the group's stream is running (its
// peer never joins) with the cause, completes the all-reduce's event, so a
// stream waiting for it drains, and fails later collectives at once.
func TestCollectivesAbort(t *testing.T) {
	errs := commtest.Run(commtest.NewGroups(2, commtest.WithTimeout(time.Minute)), func(pg backend.ProcessGroup) error {
		if pg.Rank() == 1 {
			return nil // never joins
		}
		dev := sim.New(0)
		defer dev.Close()
		c := sim.NewCollectives(pg, dev, time.Minute)
		b, err := dev.Alloc(4)
		if err != nil {
			return err
		}
		defer b.Free()
		w, done := c.AllReduceDevice(b, 0, 1, backend.Float32, backend.Sum, dev.NewEvent())
		dev.Compute().WaitEvent(done)
		require.False(t, done.Query(), "the peer never joined")
		cause := errors.New("watchdog: bucket 0 stuck")
		c.Abort(cause)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = w.Wait(ctx)
		assert.ErrorIs(t, err, backend.ErrPeerFailed)
		assert.ErrorIs(t, err, cause)
		done.Synchronize()
		assert.NoError(t, dev.Compute().Synchronize(), "the compute stream waited for the aborted all-reduce's event and drained")
		assert.Error(t, c.AllReduce(backend.Float32s([]float32{1}), backend.Sum).Wait(ctx), "a collective after the abort")
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// A trace records each operation of the device's streams with its start
// and end on the host's clock, stream by stream, and host marks between
// them; an event makes the second stream's kernel start after the first
// stream's sleep ends, and the Chrome trace names each stream's row.
func TestQueueTraceRecordsStreams(t *testing.T) {
	dev := sim.New(0)
	defer dev.Close()
	other := dev.NewStream("comm")
	tr := dev.StartTrace()
	dev.Compute().Sleep(2 * time.Millisecond)
	e := dev.NewEvent()
	e.Record(dev.Compute())
	other.WaitEvent(e)
	b, err := dev.Alloc(4)
	require.NoError(t, err)
	defer b.Free()
	other.Memset0(b, 0, 4)
	tr.Mark("queued")
	require.NoError(t, dev.Synchronize())
	dev.StopTrace()
	dev.Compute().Sleep(time.Microsecond)
	require.NoError(t, dev.Synchronize())

	find := func(stream, op string) sim.TraceSpan {
		for _, s := range tr.Spans() {
			if s.Stream == stream && s.Op == op {
				return s
			}
		}
		t.Fatalf("no %q on %q in %v", op, stream, tr.Spans())
		return sim.TraceSpan{}
	}
	sleep, memset, mark := find("compute", "sleep"), find("comm", "memset"), find("host", "queued")
	assert.False(t, memset.Start.Before(sleep.End), "the event orders the memset after the sleep")
	assert.True(t, mark.Start.Before(sleep.End), "queuing returned before the device ran it")
	n := 0
	for _, s := range tr.Spans() {
		if s.Op == "sleep" {
			n++
		}
	}
	assert.Equal(t, 1, n, "nothing is recorded after StopTrace")

	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf, 3))
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Pid  int            `json:"pid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	rows := map[string]bool{}
	for _, ev := range doc.TraceEvents {
		assert.Equal(t, 3, ev.Pid)
		if ev.Name == "thread_name" {
			rows[ev.Args["name"].(string)] = true
		}
	}
	assert.Equal(t, map[string]bool{"compute": true, "comm": true, "host": true}, rows)
}
