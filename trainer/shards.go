package trainer

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/nn"
)

// openShardStream opens -shards: a comma-separated list of globs, each
// sorted, so every rank lists the same files in the same order. The shards
// replace the job's dataset, so they must hold what it holds: inputs of its
// first sample's shape (what the model takes), and its kind of supervision,
// targets of its targets' shape or class labels within the model's output
// width. A shard that does not is an error naming it at the start, or
// naming the sample when it is read, never a panic in the loss or a layer;
// shards without labels are refused unless -unlabeled says so.
func openShardStream(out io.Writer, pg comm.ProcessGroup, rc runConfig, job Job) (*data.StreamLoader, error) {
	var paths []string
	for _, pat := range strings.Split(rc.shards, ",") {
		m, err := filepath.Glob(pat)
		if err != nil {
			return nil, fmt.Errorf("trainer: -shards %q: %w", pat, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("trainer: -shards %q matches no file", pat)
		}
		sort.Strings(m)
		paths = append(paths, m...)
	}
	want, err := shardsLike(job)
	if err != nil {
		return nil, err
	}
	opts := append([]data.ShardOption{data.ShardGroup(pg), data.ShardSeed(rc.seed), data.ShardUnlabeled(rc.unlabeled)}, want...)
	ds, err := data.OpenShards(paths, opts...)
	if errors.Is(err, data.ErrUnlabeled) {
		return nil, fmt.Errorf("trainer: -shards: %w; if the data are unlabeled, pass -unlabeled", err)
	}
	if err != nil {
		return nil, fmt.Errorf("trainer: -shards: %w", err)
	}
	if rc.unlabeled && pg.Rank() == 0 {
		fmt.Fprintln(out, "shards: -unlabeled: samples without a label train as class 0")
	}
	return data.NewStreamLoader(ds, data.BatchSize(rc.batch), data.NumWorkers(rc.workers), data.DropLast(job.DropLast))
}

// shardsLike is what the shards must hold to stand in for the job's
// dataset, from its first sample and the model.
func shardsLike(job Job) ([]data.ShardOption, error) {
	if job.Dataset == nil || job.Dataset.Len() == 0 {
		if c := classesOf(job.Model); c > 0 {
			return []data.ShardOption{data.ShardLabels(c)}, nil
		}
		return nil, nil
	}
	s, err := job.Dataset.Get(0)
	if err != nil {
		return nil, fmt.Errorf("trainer: -shards: %s's first sample, for the shapes the shards must have: %w", job.Name, err)
	}
	var opts []data.ShardOption
	if s.Input != nil {
		opts = append(opts, data.ShardInputShape(s.Input.Shape()...))
	}
	if s.Target != nil {
		return append(opts, data.ShardTargets(s.Target.Shape()...)), nil
	}
	return append(opts, data.ShardLabels(classesOf(job.Model))), nil
}

// classesOf is a classifier's number of classes: the output width of the
// model's last Linear, when nothing after it but element-wise layers
// changes the width (a Sequential such as examples/mlp's and
// examples/cnn's); 0 when the model does not say.
func classesOf(m nn.Layer) int {
	switch l := m.(type) {
	case *nn.Sequential:
		for i := l.Len() - 1; i >= 0; i-- {
			switch l.At(i).(type) {
			case *nn.ReLU, *nn.GELU, *nn.Tanh, *nn.Sigmoid, *nn.Dropout:
				continue
			}
			return classesOf(l.At(i))
		}
	case interface{ OutFeatures() int }:
		return l.OutFeatures()
	}
	return 0
}
