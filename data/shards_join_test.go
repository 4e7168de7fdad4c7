package data_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/internal/proctest"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// The shard tests below re-run this binary as rank processes (see
// internal/proctest).
func TestMain(m *testing.M) {
	proctest.Main(m, map[string]func() error{"shardjoin": shardJoinWorker})
}

// shardJoinReport is what each rank writes: the sample indices it trained
// on, its batch count and its final parameters.
type shardJoinReport struct {
	Indices []int       `json:"indices"`
	Batches int         `json:"batches"`
	Params  [][]float32 `json:"params"`
}

// shardJoinWorker trains a linear model under DDP on its share of the shards
// (2 loader workers), inside Join, so that the rank whose shards hold fewer
// samples shadows the other's collectives when it runs out.
func shardJoinWorker() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	paths := strings.Split(os.Getenv("GODDP_SHARDS"), ",")
	ds, err := data.OpenShards(paths, data.ShardGroup(pg), data.ShardSeed(3))
	if err != nil {
		return err
	}
	loader, err := data.NewStreamLoader(ds, data.BatchSize(4), data.NumWorkers(2))
	if err != nil {
		return err
	}
	model := nn.NewLinear(tensor.NewRNG(1), 3, 10)
	d, err := ddp.Wrap(ctx, model, pg)
	if err != nil {
		return err
	}
	opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.05})
	if err != nil {
		return err
	}
	var rep shardJoinReport
	err = d.Join(ctx, func() error {
		for b, err := range loader.All(ctx) {
			if err != nil {
				return err
			}
			opt.ZeroGrad()
			out, err := d.Forward(autograd.Const(b.Inputs))
			if err != nil {
				return err
			}
			if err := autograd.CrossEntropy(out, b.Labels, autograd.ReductionMean).Backward(); err != nil {
				return err
			}
			if err := opt.Step(); err != nil {
				return err
			}
			rep.Indices = append(rep.Indices, b.Indices...)
			rep.Batches++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rank %d: %w", pg.Rank(), err)
	}
	for _, p := range d.Parameters() {
		rep.Params = append(rep.Params, slices.Clone(p.Value.Contiguous().F32()))
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(os.Getenv("GODDP_SHARD_OUT"), "rank"+strconv.Itoa(pg.Rank())+".json"), b, 0o644)
}

// TestShardsJoinTwoRanks: two real ranks with two loader workers each train
// through uneven shards under Join; together they see every sample exactly
// once, the rank with fewer batches does not hang the other, and both end
// with the same parameters.
func TestShardsJoinTwoRanks(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{30, 4, 22, 6, 9, 3, 17} // uneven on purpose
	var paths []string
	id := 0
	for j, n := range sizes {
		x := make([]float32, 3*n)
		lab := make([]int64, n)
		for i := range n {
			for k := range 3 {
				x[3*i+k] = float32(id+i) + float32(k)/4
			}
			lab[i] = int64((id + i) % 10)
		}
		p := filepath.Join(dir, fmt.Sprintf("s%d.npy", j))
		writeNPY(t, p, &data.Array{Shape: []int{n, 3}, Data: x})
		writeNPY(t, strings.TrimSuffix(p, ".npy")+".labels.npy", &data.Array{Shape: []int{n}, Data: lab})
		paths = append(paths, p)
		id += n
	}
	out := t.TempDir()
	res := proctest.Run(t, proctest.Options{Worker: "shardjoin", World: 2, Timeout: 90 * time.Second,
		Env: []string{"GODDP_SHARDS=" + strings.Join(paths, ","), "GODDP_SHARD_OUT=" + out}})
	proctest.RequireSuccess(t, res)
	var reps [2]shardJoinReport
	var all []int
	for r := range 2 {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank%d.json", r)))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &reps[r]))
		all = append(all, reps[r].Indices...)
	}
	slices.Sort(all)
	want := make([]int, id)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, all, "the two ranks' samples: each exactly once")
	require.NotEqual(t, reps[0].Batches, reps[1].Batches, "the shards were meant to be uneven, so that Join has work")
	require.Equal(t, reps[0].Params, reps[1].Params, "ranks diverged")
	t.Logf("batches per rank: %d and %d", reps[0].Batches, reps[1].Batches)
}

func writeNPY(t *testing.T, path string, a *data.Array) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, data.WriteNPY(f, a))
	require.NoError(t, f.Close())
}
