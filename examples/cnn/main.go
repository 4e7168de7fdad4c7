// Command cnn trains the Fashion-MNIST benchmark convnet (the dataset's own
// benchmark/convnet.py) on the real Fashion-MNIST training set and evaluates
// it on the 10k test set after every epoch, the workload of
// ../shared/anchors/torch_models.py's "cnn":
//
//	Conv2d(1,32,5,pad 2)-ReLU-MaxPool2d(2)-Conv2d(32,64,5,pad 2)-ReLU-MaxPool2d(2)
//	-Flatten-Linear(3136,1024)-ReLU-Dropout(0.4)-Linear(1024,10)
//
// Pixels scaled to [0,1], SGD lr 0.01 momentum 0.9, batch 64 per rank,
// cross-entropy (-dropout sets the dropout probability). Rank 0 prints each epoch's mean training loss (loss=), the
// test accuracy over all ranks (test_acc=) and finally samples_per_s. Run it
// under the launcher:
//
//	go run ./cmd/ddprun --standalone --nproc-per-node 2 ./examples/cnn -epochs 2
//
// The data are the four IDX files of Debian's dataset-fashion-mnist package
// (apt-get install dataset-fashion-mnist) under /usr/share/datasets/fashion-mnist,
// or under the directory FASHION_MNIST_DIR names.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	_ "github.com/goddp/goddp/devices" // registers cuda and sim: -device cuda, sim, sim:N
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/trainer"
)

const defaultDir = "/usr/share/datasets/fashion-mnist"

// dropout is the -dropout flag: the probability of the Dropout layer
// (torch anchor's 0.4; 0 makes a run on a device comparable with the CPU's
// step for step, since a device draws its dropout masks differently).
var dropout = 0.4

var defaults = trainer.Defaults{Epochs: 2, BatchSize: 64, SaveEvery: 1, CkptDir: "checkpoints/cnn",
	Flags: func(fs *flag.FlagSet) {
		fs.Float64Var(&dropout, "dropout", dropout, "probability of the Dropout layer before the last Linear")
	}}

func main() { os.Exit(trainer.Main(os.Args, os.Stdout, defaults, build)) }

// build makes the job from the run's seed: data, model, optimizer and loss.
func build(rng *tensor.RNG) (trainer.Job, error) {
	dir := os.Getenv("FASHION_MNIST_DIR")
	if dir == "" {
		dir = defaultDir
	}
	train, err := loadImages(dir, "train")
	if err != nil {
		return trainer.Job{}, err
	}
	test, err := loadImages(dir, "t10k")
	if err != nil {
		return trainer.Job{}, err
	}
	releaseLoadGarbage()
	if dropout < 0 || dropout > 1 {
		return trainer.Job{}, fmt.Errorf("cnn: -dropout %v is not a probability in [0, 1]", dropout)
	}
	return trainer.Job{
		Name:        "cnn",
		Dataset:     train,
		EvalDataset: test,
		Model:       newConvNet(rng, dropout),
		NewOpt: func(params []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewSGD(params, optim.SGDConfig{LR: 0.01, Momentum: 0.9})
		},
		Loss: func(out *autograd.Variable, b data.Batch) *autograd.Variable {
			return autograd.CrossEntropy(out, b.Labels, autograd.ReductionMean)
		},
	}, nil
}

// releaseLoadGarbage hands the decoding buffers of the IDX files (the
// gzipped and raw bytes, ~100 MB for the training set) back to the OS, and
// lowers the GC target unless GOGC is set: the 220 MB of float32 images are
// live for the whole run and hold no pointers, so the default GOGC=100 let
// the heap grow by as much again between collections, which cost RSS and
// saved little GC work.
func releaseLoadGarbage() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	runtime.GC()
	debug.FreeOSMemory()
}

// gcPercent is the GC target used unless GOGC is set.
const gcPercent = 25

// NewConvNet returns the benchmark convnet with torch's default initialisation.
func NewConvNet(rng *tensor.RNG) *nn.Sequential { return newConvNet(rng, 0.4) }

// newConvNet is NewConvNet with dropout probability p.
func newConvNet(rng *tensor.RNG, p float64) *nn.Sequential {
	return nn.NewSequential(
		nn.NewConv2d(rng, 1, 32, 5, nn.Padding(2)), nn.NewReLU(), nn.NewMaxPool2d(2),
		nn.NewConv2d(rng, 32, 64, 5, nn.Padding(2)), nn.NewReLU(), nn.NewMaxPool2d(2),
		nn.NewFlatten(), nn.NewLinear(rng, 3136, 1024), nn.NewReLU(), nn.NewDropout(rng, p),
		nn.NewLinear(rng, 1024, 10))
}

// loadImages reads split ("train" or "t10k") with data.LoadMNIST, which
// scales the pixels to [0,1], and serves each image as [1, 28, 28].
func loadImages(dir, split string) (*images, error) {
	var paths [2]string
	for i, kind := range []string{"images-idx3", "labels-idx1"} {
		base := filepath.Join(dir, split+"-"+kind+"-ubyte")
		paths[i] = base
		if _, err := os.Stat(base); errors.Is(err, fs.ErrNotExist) {
			paths[i] = base + ".gz"
		}
		if _, err := os.Stat(paths[i]); err != nil {
			return nil, fmt.Errorf("cnn: Fashion-MNIST %s file missing (%w); install it with `apt-get install dataset-fashion-mnist` "+
				"(or run scripts/setup.sh), or set FASHION_MNIST_DIR to a directory holding %s-%s-ubyte[.gz]", split, err, split, kind)
		}
	}
	ds, err := data.LoadMNIST(paths[0], paths[1])
	if err != nil {
		return nil, fmt.Errorf("cnn: %w", err)
	}
	return &images{ds}, nil
}

// images reshapes the rows of a flat [N, 784] dataset to [N, 1, 28, 28]
// without copying.
type images struct{ *data.TensorDataset }

func (d *images) Get(i int) (data.Sample, error) {
	s, err := d.TensorDataset.Get(i)
	if err == nil {
		s.Input = s.Input.Reshape(1, 28, 28)
	}
	return s, err
}

func (d *images) GetBatch(idx []int) (data.Batch, error) {
	b, err := d.TensorDataset.GetBatch(idx)
	if err == nil {
		b.Inputs = b.Inputs.Reshape(-1, 1, 28, 28)
	}
	return b, err
}
