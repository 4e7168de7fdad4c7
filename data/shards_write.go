package data

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/goddp/goddp/internal/atomicfile"
	"github.com/goddp/goddp/tensor"
)

// ShardFormat is the file format WriteShards writes.
type ShardFormat string

// The shard formats OpenShards reads.
const (
	ShardNPY ShardFormat = "npy" // X.npy of inputs with X.labels.npy or X.targets.npy
	ShardTar ShardFormat = "tar" // webdataset: KEY.npy with KEY.cls or KEY.target.npy
)

// WriteShards writes ds's samples, in index order, as shard files of at
// most perShard samples each into dir, named prefix-000000.npy and so on
// (webdataset's ShardWriter), and returns their paths. Inputs and targets
// are stored as float32. Each file is written under a temporary name and
// renamed when complete, so a reader never sees half a shard.
func WriteShards(ds Dataset, dir, prefix string, perShard int, format ShardFormat) ([]string, error) {
	if perShard < 1 {
		return nil, fmt.Errorf("%w: WriteShards: perShard must be at least 1, got %d", ErrConfig, perShard)
	}
	if format != ShardNPY && format != ShardTar {
		return nil, fmt.Errorf("%w: WriteShards: unknown format %q (want npy or tar)", ErrConfig, format)
	}
	var paths []string
	for first := 0; first < ds.Len(); first += perShard {
		n := min(perShard, ds.Len()-first)
		samples := make([]Sample, n)
		for i := range n {
			s, err := ds.Get(first + i)
			if err != nil {
				return paths, fmt.Errorf("data: WriteShards: sample %d: %w", first+i, err)
			}
			if s.Input == nil {
				return paths, fmt.Errorf("%w: WriteShards: sample %d has no input", ErrShape, first+i)
			}
			samples[i] = s
		}
		base := filepath.Join(dir, fmt.Sprintf("%s-%06d", prefix, len(paths)))
		var err error
		if format == ShardNPY {
			err = writeNPYShardFiles(base, samples, first)
		} else {
			err = writeTarShardFile(base+".tar", samples, first)
		}
		if err != nil {
			return paths, err
		}
		paths = append(paths, base+"."+string(format))
	}
	return paths, nil
}

func writeNPYShardFiles(base string, samples []Sample, first int) error {
	shape := samples[0].Input.Shape()
	row := samples[0].Input.Numel()
	x := make([]float32, 0, len(samples)*row)
	for i, s := range samples {
		if s.Input.Numel() != row {
			return fmt.Errorf("%w: WriteShards: sample %d's input has shape %v, sample %d's %v", ErrShape, first+i, s.Input.Shape(), first, shape)
		}
		x = append(x, f32sOf(s)...)
	}
	if err := writeFileAtomic(base+".npy", func(b io.Writer) error {
		return WriteNPY(b, &Array{Shape: append([]int{len(samples)}, shape...), Data: x})
	}); err != nil {
		return err
	}
	if samples[0].Target != nil {
		tshape := samples[0].Target.Shape()
		var y []float32
		for i, s := range samples {
			if s.Target == nil || s.Target.Numel() != samples[0].Target.Numel() {
				return fmt.Errorf("%w: WriteShards: sample %d's target does not match sample %d's %v", ErrShape, first+i, first, tshape)
			}
			y = append(y, asF32(s.Target)...)
		}
		return writeFileAtomic(base+".targets.npy", func(b io.Writer) error {
			return WriteNPY(b, &Array{Shape: append([]int{len(samples)}, tshape...), Data: y})
		})
	}
	lab := make([]int64, len(samples))
	for i, s := range samples {
		lab[i] = int64(s.Label)
	}
	return writeFileAtomic(base+".labels.npy", func(b io.Writer) error {
		return WriteNPY(b, &Array{Shape: []int{len(samples)}, Data: lab})
	})
}

// f32sOf is a sample's input as float32s.
func f32sOf(s Sample) []float32 { return asF32(s.Input) }

func asF32(t *tensor.Tensor) []float32 {
	t = t.Contiguous()
	if t.DType() == tensor.Float64 {
		d := t.F64()
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = float32(v)
		}
		return out
	}
	return t.F32()
}

func writeTarShardFile(path string, samples []Sample, first int) error {
	return writeFileAtomic(path, func(out io.Writer) error {
		tw := tar.NewWriter(out)
		recorded := false
		add := func(name string, body []byte) error {
			h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}
			if !recorded {
				// The sample count, for OpenShards to check (tarSamplesRecord).
				h.PAXRecords, recorded = map[string]string{tarSamplesRecord: strconv.Itoa(len(samples))}, true
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err := tw.Write(body)
			return err
		}
		for i, s := range samples {
			key := fmt.Sprintf("%09d", first+i)
			var b bytes.Buffer
			if err := WriteNPY(&b, &Array{Shape: s.Input.Shape(), Data: f32sOf(s)}); err != nil {
				return err
			}
			if err := add(key+".npy", b.Bytes()); err != nil {
				return err
			}
			if s.Target != nil {
				b.Reset()
				if err := WriteNPY(&b, &Array{Shape: s.Target.Shape(), Data: asF32(s.Target)}); err != nil {
					return err
				}
				if err := add(key+".target.npy", b.Bytes()); err != nil {
					return err
				}
			} else if err := add(key+".cls", []byte(strconv.Itoa(s.Label))); err != nil {
				return err
			}
		}
		return tw.Close()
	})
}

// writeFileAtomic writes what fill produces to path through a temporary
// file in the same directory (internal/atomicfile: fsynced, renamed, the
// directory fsynced), so that a reader never opens half a shard.
func writeFileAtomic(path string, fill func(io.Writer) error) error {
	if err := atomicfile.Write(path, "."+filepath.Base(path)+".tmp-*", fill); err != nil {
		return fmt.Errorf("data: WriteShards: %s: %w", path, err)
	}
	return nil
}
