package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

func fullCheckpoint(epoch, step int) *Checkpoint {
	return &Checkpoint{
		Epoch: epoch,
		Step:  step,
		Model: map[string]*tensor.Tensor{
			"0.weight": tensor.FromF32([]float32{1, 2, 3, 4}, 2, 2),
			"0.bias":   tensor.FromF32([]float32{0.5, -0.5}, 2),
		},
		Optimizer: &OptimizerState{
			Kind:    "Adam",
			Tensors: map[string]*tensor.Tensor{"state.0.exp_avg": tensor.FromF32([]float32{.1, .2, .3, .4}, 2, 2)},
			Scalars: map[string]float64{"state.0.step": 7, "param_groups.0.lr": 1e-3, "weird": math.Inf(-1), "third": 1.0 / 3},
		},
		Scheduler: &OptimizerState{Kind: "StepLR", Tensors: map[string]*tensor.Tensor{}, Scalars: map[string]float64{"last_epoch": 4}},
		Sampler:   &data.SamplerState{Epoch: epoch, Position: 96, Seed: 1, NumReplicas: 2, DatasetLen: 2048, Shuffle: true},
		// A scale that is not a short decimal: it must come back bit for bit.
		GradScaler: &GradScalerState{Scale: 65536 * 0.5 * 0.5 * 3.0000002, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, GrowthTracker: 17},
		RNG:        []byte{0, 1, 2, 255},
		Config:     json.RawMessage(`{"lr":0.001,"batch_size":32}`),
		Meta:       map[string]string{"git": "abc123"},
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.safetensors")
	want := fullCheckpoint(5, 160)
	require.NoError(t, Save(p, want))
	got, err := Load(p)
	require.NoError(t, err)
	assert.Equal(t, want.Epoch, got.Epoch)
	assert.Equal(t, want.Step, got.Step)
	assertSameTensors(t, want.Model, got.Model)
	assert.Equal(t, want.Optimizer.Kind, got.Optimizer.Kind)
	assert.Equal(t, want.Optimizer.Scalars, got.Optimizer.Scalars)
	assertSameTensors(t, want.Optimizer.Tensors, got.Optimizer.Tensors)
	assert.Equal(t, want.Scheduler.Scalars, got.Scheduler.Scalars)
	assert.Equal(t, want.Sampler, got.Sampler)
	assert.Equal(t, want.GradScaler, got.GradScaler)
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	_, meta, err := DecodeSafetensors(raw, p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"scale":49152.004,"growth_factor":2,"backoff_factor":0.5,"growth_interval":2000,"_growth_tracker":17}`,
		meta["goddp.grad_scaler"], "torch's GradScaler.state_dict() names")
	assert.Equal(t, want.RNG, got.RNG)
	assert.JSONEq(t, string(want.Config), string(got.Config))
	assert.Equal(t, want.Meta, got.Meta)

	// A minimal checkpoint has no optional parts.
	require.NoError(t, Save(p, &Checkpoint{Epoch: 1}))
	got, err = Load(p)
	require.NoError(t, err)
	assert.Nil(t, got.Optimizer)
	assert.Nil(t, got.Sampler)
	assert.Nil(t, got.GradScaler, "a checkpoint without GradScaler state (the format before it) loads with none")
	assert.Nil(t, got.RNG)
	assert.Empty(t, got.Model)

	require.Error(t, Save(p, &Checkpoint{Config: json.RawMessage(`{bad`)}))
	_, err = Load(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A plain safetensors file is not a checkpoint.
	require.NoError(t, SaveSafetensors(p, want.Model, nil))
	_, err = Load(p)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "not a goddp checkpoint")
}

func TestCheckpointTruncatedAndCorruptNameTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "run.safetensors")
	require.NoError(t, Save(p, fullCheckpoint(1, 1)))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	for name, mutate := range map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)-3] },
		"corrupt":   func(b []byte) []byte { b[len(b)-5] ^= 0xff; return b },
		"empty":     func([]byte) []byte { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(p, mutate(append([]byte(nil), b...)), 0o644))
			_, err := Load(p)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), p)
		})
	}
}

func TestManager(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(filepath.Join(dir, "ckpts"), Keep(2))
	require.NoError(t, err)
	_, err = m.Latest()
	require.ErrorIs(t, err, ErrNotFound)

	for e := 1; e <= 4; e++ {
		p, err := m.Save(fullCheckpoint(e, e*10))
		require.NoError(t, err)
		assert.Equal(t, m.Path(e, e*10), p)
	}
	ls, err := m.List()
	require.NoError(t, err)
	assert.Equal(t, []string{m.Path(4, 40), m.Path(3, 30)}, ls, "keeps the newest 2, newest first")

	f, err := m.Latest()
	require.NoError(t, err)
	assert.Equal(t, 4, f.Checkpoint.Epoch)
	assert.Empty(t, f.Skipped)

	// Corrupt the newest: Latest falls back and says why.
	raw, err := os.ReadFile(ls[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(ls[0], raw[:len(raw)/2], 0o644))
	// Leftovers of a killed save and unrelated files are ignored.
	leftover := filepath.Join(m.Dir(), tempOf(endedWriter(t), "ckpt-e00000009-s000000000090.safetensors"))
	require.NoError(t, os.WriteFile(leftover, raw[:10], 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir(), "notes.txt"), []byte("hi"), 0o644))
	f, err = m.Latest()
	require.NoError(t, err)
	assert.Equal(t, 3, f.Checkpoint.Epoch)
	require.Len(t, f.Skipped, 1)
	assert.Equal(t, ls[0], f.Skipped[0].Path)
	require.ErrorIs(t, f.Skipped[0].Err, ErrCorrupt)
	assert.Contains(t, f.Skipped[0].Err.Error(), "truncated")

	// Everything corrupt: ErrNotFound with the reasons.
	require.NoError(t, os.WriteFile(ls[1], []byte("garbage"), 0o644))
	f, err = m.Latest()
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Len(t, f.Skipped, 2)

	// The next save cleans the temporary file, its writer being gone.
	_, err = m.Save(fullCheckpoint(5, 50))
	require.NoError(t, err)
	_, err = os.Stat(leftover)
	require.ErrorIs(t, err, os.ErrNotExist)

	_, err = NewManager(dir, Keep(-1))
	require.Error(t, err)
}

// testModel is a minimal nn.Module.
type testModel struct {
	params  []nn.NamedParameter
	buffers []nn.NamedBuffer
}

func (m *testModel) NamedParameters() []nn.NamedParameter { return m.params }
func (m *testModel) NamedBuffers() []nn.NamedBuffer       { return m.buffers }
func (m *testModel) Train(bool)                           {}
func (m *testModel) Training() bool                       { return true }

func newTestModel(w, b []float32) *testModel {
	return &testModel{
		params: []nn.NamedParameter{
			{Name: "fc.weight", Param: autograd.Param(tensor.FromF32(w, 1, len(w)))},
			{Name: "fc.bias", Param: autograd.Param(tensor.FromF32(b, 1))},
		},
		buffers: []nn.NamedBuffer{{Name: "bn.running_mean", Buffer: tensor.FromF64([]float64{0, 0}, 2)}},
	}
}

func TestStateDict(t *testing.T) {
	src := newTestModel([]float32{1, 2, 3}, []float32{4})
	src.buffers[0].Buffer.F64()[1] = 9
	sd := StateDict(src)
	require.Len(t, sd, 3)

	dst := newTestModel([]float32{0, 0, 0}, []float32{0})
	wBefore := dst.params[0].Param.Value
	require.NoError(t, LoadStateDict(dst, sd, true))
	assert.Same(t, wBefore, dst.params[0].Param.Value, "loaded in place")
	assert.Equal(t, []float32{1, 2, 3}, dst.params[0].Param.Value.F32())
	assert.Equal(t, []float64{0, 9}, dst.buffers[0].Buffer.F64())

	// float64 checkpoint into a float32 model converts.
	sd64 := map[string]*tensor.Tensor{"fc.weight": tensor.FromF64([]float64{7, 8, 9}, 1, 3)}
	require.NoError(t, LoadStateDict(dst, sd64, false))
	assert.Equal(t, []float32{7, 8, 9}, dst.params[0].Param.Value.F32())

	err := LoadStateDict(dst, sd64, true)
	require.ErrorIs(t, err, ErrMismatch)
	assert.Contains(t, err.Error(), "missing keys")
	assert.Contains(t, err.Error(), `"fc.bias"`)
	assert.Contains(t, err.Error(), `"bn.running_mean"`)
	assert.ErrorIs(t, err, nn.ErrStateDict)

	extra := StateDict(src)
	extra["fc2.weight"] = tensor.FromF32([]float32{1}, 1)
	err = LoadStateDict(dst, extra, true)
	assert.Contains(t, err.Error(), `unexpected keys ["fc2.weight"]`)
	require.NoError(t, LoadStateDict(dst, extra, false))

	bad := StateDict(src)
	bad["fc.weight"] = tensor.FromF32([]float32{1, 2}, 1, 2)
	before := append([]float32(nil), dst.params[1].Param.Value.F32()...)
	dst.params[1].Param.Value.F32()[0] = -1
	before[0] = -1
	err = LoadStateDict(dst, bad, true)
	require.ErrorIs(t, err, ErrMismatch)
	assert.Contains(t, err.Error(), `"fc.weight: state dict [1 2], module [1 3]"`)
	assert.Equal(t, before, dst.params[1].Param.Value.F32(), "nothing loaded on error")
}

// runRanks runs f on every rank of a fake group concurrently.
func runRanks(t *testing.T, size int, f func(pg comm.ProcessGroup) error) []error {
	t.Helper()
	pgs := commtest.NewGroups(size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(pgs[r])
		}()
	}
	wg.Wait()
	return errs
}

func TestSaveOnRank0AndBroadcast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	m, err := NewManager(dir)
	require.NoError(t, err)

	paths := make([]string, 3)
	errs := runRanks(t, 3, func(pg comm.ProcessGroup) error {
		var c *Checkpoint
		if pg.Rank() == 0 {
			c = fullCheckpoint(2, 64)
		}
		p, err := SaveOnRank0(ctx, pg, m, c)
		paths[pg.Rank()] = p
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		assert.Equal(t, m.Path(2, 64), paths[r])
	}

	got := make([]*Checkpoint, 3)
	errs = runRanks(t, 3, func(pg comm.ProcessGroup) error {
		var mm *Manager
		if pg.Rank() == 0 {
			mm = m // only rank 0 needs the directory
		}
		var err error
		if mm == nil {
			mm = &Manager{dir: filepath.Join(dir, "does-not-exist")}
		}
		got[pg.Rank()], err = LoadLatestAndBroadcast(ctx, pg, mm)
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		assert.Equal(t, 2, got[r].Epoch)
		assertSameTensors(t, fullCheckpoint(2, 64).Model, got[r].Model)
		assert.Equal(t, 96, got[r].Sampler.Position)
	}

	errs = runRanks(t, 2, func(pg comm.ProcessGroup) error {
		c, err := LoadAndBroadcast(ctx, pg, m.Path(2, 64))
		if err == nil && c.Step != 64 {
			return fmt.Errorf("step %d", c.Step)
		}
		return err
	})
	require.NoError(t, errors.Join(errs...))
}

func TestDistributedFailuresReachEveryRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	empty, err := NewManager(t.TempDir())
	require.NoError(t, err)

	t.Run("no checkpoint", func(t *testing.T) {
		errs := runRanks(t, 3, func(pg comm.ProcessGroup) error {
			_, err := LoadLatestAndBroadcast(ctx, pg, empty)
			return err
		})
		for _, err := range errs {
			require.ErrorIs(t, err, ErrNotFound)
		}
	})
	t.Run("corrupt file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "x.safetensors")
		require.NoError(t, os.WriteFile(p, []byte("not a checkpoint"), 0o644))
		errs := runRanks(t, 2, func(pg comm.ProcessGroup) error {
			_, err := LoadAndBroadcast(ctx, pg, p)
			return err
		})
		require.ErrorIs(t, errs[0], ErrCorrupt)
		require.ErrorIs(t, errs[1], ErrRemote)
		assert.Contains(t, errs[1].Error(), p)
	})
	t.Run("save fails", func(t *testing.T) {
		errs := runRanks(t, 3, func(pg comm.ProcessGroup) error {
			_, err := SaveOnRank0(ctx, pg, empty, nil) // nil checkpoint on rank 0
			return err
		})
		require.Error(t, errs[0])
		for _, err := range errs[1:] {
			require.ErrorIs(t, err, ErrRemote)
			assert.Contains(t, err.Error(), "nil checkpoint")
		}
	})
	t.Run("absent rank 0 times out, no hang", func(t *testing.T) {
		pgs := commtest.NewGroups(2)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := SaveOnRank0(short, pgs[1], empty, nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestBroadcastLargePayload(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 20 MB")
	}
	ctx := context.Background()
	big := make([]float32, chunkFloats+12345) // more than one chunk
	for i := range big {
		big[i] = float32(i)
	}
	p := filepath.Join(t.TempDir(), "big.safetensors")
	require.NoError(t, Save(p, &Checkpoint{Model: map[string]*tensor.Tensor{"w": tensor.FromF32(big, len(big))}}))
	errs := runRanks(t, 2, func(pg comm.ProcessGroup) error {
		c, err := LoadAndBroadcast(ctx, pg, p)
		if err != nil {
			return err
		}
		if w := c.Model["w"].F32(); len(w) != len(big) || w[len(w)-1] != big[len(big)-1] {
			return fmt.Errorf("rank %d: payload damaged", pg.Rank())
		}
		return nil
	})
	require.NoError(t, errors.Join(errs...))
}
