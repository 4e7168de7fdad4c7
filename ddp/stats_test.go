package ddp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

func TestUnionLength(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(a, b int) [2]time.Time {
		return [2]time.Time{t0.Add(time.Duration(a) * time.Millisecond), t0.Add(time.Duration(b) * time.Millisecond)}
	}
	tests := []struct {
		name  string
		spans [][2]time.Time
		want  time.Duration
	}{
		{"none", nil, 0},
		{"disjoint", [][2]time.Time{at(0, 2), at(5, 6)}, 3 * time.Millisecond},
		{"overlapping, unsorted", [][2]time.Time{at(3, 8), at(0, 4), at(5, 6)}, 8 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, unionLength(tc.spans)) })
	}
	assert.Equal(t, 0.75, IterStats{Comm: 4, CommWait: 1}.HiddenFraction())
	assert.Equal(t, 1.0, IterStats{}.HiddenFraction())
}

func TestStatsAndTimeline(t *testing.T) {
	dir := t.TempDir()
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := mlpNet([]int{16, 32, 4}, 1)
		d, err := Wrap(context.Background(), net, pg, WithTimeline(nil), FirstBucketCapMB(1e-4))
		if err != nil {
			return err
		}
		opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.01})
		if err != nil {
			return err
		}
		for step := 0; step < 3; step++ {
			x, y := batch(rank, step, 8, 16, 4)
			opt.ZeroGrad()
			out, err := d.Forward(x)
			if err != nil {
				return err
			}
			if err := autograd.MSELoss(out, y, autograd.ReductionMean).Backward(); err != nil {
				return err
			}
			end := d.Timeline().Span("optimizer step")
			if err := opt.Step(); err != nil {
				return err
			}
			end()
		}
		s := d.Stats()
		assert.Equal(t, int64(3), s.Iterations)
		assert.Len(t, s.BucketBytes, 2)
		assert.Len(t, s.Last.BucketComm, 2)
		assert.Greater(t, s.Last.Comm, time.Duration(0))
		assert.GreaterOrEqual(t, s.Last.Comm, s.Last.BucketComm[0])
		assert.Greater(t, s.Last.Forward, time.Duration(0))
		assert.Greater(t, s.Last.Backward, time.Duration(0))
		assert.GreaterOrEqual(t, s.Total.Comm, s.Last.Comm)
		h := s.Total.HiddenFraction()
		assert.True(t, h >= 0 && h <= 1, "hidden fraction %v", h)

		path := filepath.Join(dir, "rank"+string(rune('0'+rank))+".json")
		if err := d.Timeline().WriteFile(path); err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var evs []map[string]any
		if err := json.Unmarshal(b, &evs); err != nil {
			return err
		}
		names := map[string]int{}
		for _, e := range evs {
			if e["ph"] == "X" {
				names[e["name"].(string)]++
				assert.Equal(t, float64(rank), e["pid"])
			}
		}
		for _, n := range []string{"forward", "backward", "allreduce bucket 0", "allreduce bucket 1", "optimizer step"} {
			assert.Equal(t, 3, names[n], "%s events", n)
		}
		if err := d.WriteTimeline(context.Background(), filepath.Join(dir, "gathered.json")); err != nil {
			return err
		}
		d.ResetStats()
		assert.Zero(t, d.Stats().Iterations)
		return nil
	}, commtest.WithLatency(2*time.Millisecond))
	requireNoErrs(t, errs)
	merged := filepath.Join(dir, "all.json")
	require.NoError(t, MergeTimelineFiles(merged, filepath.Join(dir, "rank0.json"), filepath.Join(dir, "rank1.json")))
	b, err := os.ReadFile(merged)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), `"rank 1"`))
	b, err = os.ReadFile(filepath.Join(dir, "gathered.json"))
	require.NoError(t, err)
	var evs []map[string]any
	require.NoError(t, json.Unmarshal(b, &evs))
	pids := map[float64]bool{}
	for _, e := range evs {
		pids[e["pid"].(float64)] = true
	}
	assert.Equal(t, map[float64]bool{0: true, 1: true}, pids)
}

func TestNilTimelineIsSafe(t *testing.T) {
	var tl *Timeline
	tl.Span("x")()
	tl.Record("y", time.Now(), time.Millisecond)
	assert.Zero(t, tl.Len())
	var buf bytes.Buffer
	_, err := tl.WriteTo(&buf)
	require.NoError(t, err)
	assert.Equal(t, "[]\n", buf.String())
}

// slowOp is the identity whose backward takes d: compute that a bucket's
// all-reduce can hide behind.
type slowOp struct {
	in *autograd.Variable
	d  time.Duration
}

func (o *slowOp) Name() string                 { return "testSlow" }
func (o *slowOp) Inputs() []*autograd.Variable { return []*autograd.Variable{o.in} }
func (o *slowOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	time.Sleep(o.d)
	return []*tensor.Tensor{gy.Clone()}
}

// TestOverlapHidesCommunication is the mechanism behind the 80% goal: where
// a core (here, the in-memory group's latency) lets a bucket's all-reduce
// run while backward goes on, every bucket but the last hides behind the
// backward of the layers before it. 16 layers, each bucket's all-reduce
// 2 ms, each layer's backward 10 ms: 15 of 16 layers' communication should
// hide (94%). The 0.8 threshold leaves room for a late timer or two on a
// loaded machine; this checks the mechanism, not a speed.
func TestOverlapHidesCommunication(t *testing.T) {
	const layers = 16
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		sizes := make([]int, layers+1)
		for i := range sizes {
			sizes[i] = 8
		}
		net := mlpNet(sizes, 1)
		net.fwd = func(n *testNet, x *autograd.Variable) *autograd.Variable {
			h := x
			for l := 0; l < len(n.params)/2; l++ {
				h = autograd.Linear(h, n.params[2*l], n.params[2*l+1])
				if l+1 < len(n.params)/2 {
					// layer l's backward (and so its bucket) comes 10 ms
					// after layer l+1's
					h = autograd.FromOp(h.Value.Clone(), &slowOp{h, 10 * time.Millisecond})
				}
			}
			return h
		}
		// One bucket per layer: a layer is 288 bytes (8x8 weight, 8 bias),
		// and a bucket closes once it reaches the cap.
		const capMB = 288.0 / (1 << 20)
		d, err := Wrap(context.Background(), net, pg, FirstBucketCapMB(capMB), BucketCapMB(capMB))
		if err != nil {
			return err
		}
		if got := len(d.Stats().BucketBytes); got != layers {
			return fmt.Errorf("%d buckets, want one per layer (%d)", got, layers)
		}
		for step := 0; step < 2; step++ {
			x, y := batch(rank, step, 4, 8, 8)
			out, err := d.Forward(x)
			if err != nil {
				return err
			}
			if err := autograd.MSELoss(out, y, autograd.ReductionMean).Backward(); err != nil {
				return err
			}
		}
		s := d.Stats()
		h := s.Total.HiddenFraction()
		t.Logf("rank %d: %.1f%% of communication hidden", rank, 100*h)
		if h < 0.8 {
			return fmt.Errorf("hidden %.2f, want >= 0.8 (comm %v, wait %v over %d iterations)", h, s.Total.Comm, s.Total.CommWait, s.Iterations)
		}
		return nil
	}, commtest.WithLatency(2*time.Millisecond))
	requireNoErrs(t, errs)
}
