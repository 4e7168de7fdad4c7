package trainer

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/internal/bytesize"
	"github.com/goddp/goddp/tensor"
)

// openDevice resolves -device for this rank: "cpu"; "sim", goddp/cuda/sim's
// simulated GPU number LOCAL_RANK; "cuda", cuda:LOCAL_RANK (a cuda build on
// a machine with a GPU; DDP keeps its buckets there on the cuda Context's
// streams and events, and hands them to NCCL in device memory under
// GODDP_BACKEND=nccl; run on one H100, see docs/gpu.md). "cuda:N" and "sim:N", as
// torch names devices, pick device N for every rank: two ranks on one GPU
// (NCCL refuses that, so they reduce over shm or tcp). It returns the
// device and a function that releases it. GODDP_DEVICE_MEMORY_LIMIT caps
// a sim or cuda device's memory (deviceMemoryLimit).
func openDevice(name string, localRank int) (tensor.Device, func(), error) {
	dev, release, err := openDeviceNamed(name, localRank)
	if err != nil || tensor.IsCPU(dev) {
		return dev, release, err
	}
	limit, err := deviceMemoryLimit(os.Getenv)
	if err == nil && limit > 0 {
		err = tensor.SetMemoryLimit(dev, limit)
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("trainer: -device %q: %w", name, err)
	}
	return dev, release, nil
}

// deviceMemoryLimit reads GODDP_DEVICE_MEMORY_LIMIT (unset or 0: no cap),
// a byte count such as 2G or 512M: the most memory a device's caching
// allocator reserves, as torch.cuda.set_per_process_memory_fraction caps
// torch's. At the cap, the garbage collector runs before the device takes
// more: the memory of device tensors nothing references comes back only
// when the collector finds them (the autograd graph's own intermediates
// go back at the end of each step, FreeGraph), so without a cap a device's
// footprint also holds whatever garbage builds up between two collections
// of the host heap.
func deviceMemoryLimit(getenv func(string) string) (int64, error) {
	v := getenv("GODDP_DEVICE_MEMORY_LIMIT")
	if v == "" {
		return 0, nil
	}
	n, err := bytesize.Parse(v)
	if err != nil {
		return 0, fmt.Errorf("GODDP_DEVICE_MEMORY_LIMIT: %w", err)
	}
	return n, nil
}

// openDeviceNamed opens -device through goddp/tensor's registry: the
// drivers the program links register their kinds (examples import
// goddp/devices, which links cuda and sim), so the trainer names no
// driver. A kind without a number is this rank's device of that kind.
// The release closes the device; on a cuda device it also prints the op
// times when GODDP_CUDA_OP_TIMES is set (configureCUDA).
func openDeviceNamed(name string, localRank int) (tensor.Device, func(), error) {
	if name == "" || name == "cpu" {
		return tensor.CPU(), func() {}, nil
	}
	full := name
	if !strings.Contains(name, ":") {
		full = fmt.Sprintf("%s:%d", name, localRank)
	}
	dev, err := tensor.OpenDevice(full)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: -device %q: %w", name, err)
	}
	closeDev := func() {
		if c, ok := dev.(io.Closer); ok {
			_ = c.Close()
		}
	}
	release, err := configureCUDA(dev, closeDev)
	if err != nil {
		closeDev()
		return nil, nil, fmt.Errorf("trainer: -device %q (%s): %w", name, full, err)
	}
	return dev, release, nil
}

// cudaEnv are the per-context CUDA switches the trainer takes from the
// environment (cudaSettings).
type cudaEnv struct {
	tf32, cudnn, cudnnBenchmark, opTimes bool
}

// cudaSettings reads them (getenv is os.Getenv): GODDP_ALLOW_TF32=1 lets
// float32 GEMMs and convolutions use TF32 tensor cores (off by default, as
// torch's allow_tf32), GODDP_CUDNN=0 keeps convolutions off cuDNN (on by
// default where it loads, as torch.backends.cudnn.enabled),
// GODDP_CUDNN_BENCHMARK=1 has cuDNN time its algorithms for each shape
// (torch.backends.cudnn.benchmark; off by default), GODDP_CUDA_OP_TIMES=1 profiles every call the device queues
// (cuda.Context.StartOpTimes; off by default). A value that is not a
// boolean is an error naming the variable.
func cudaSettings(getenv func(string) string) (cudaEnv, error) {
	parse := func(name string, def bool) (bool, error) {
		v := getenv(name)
		if v == "" {
			return def, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return def, fmt.Errorf("trainer: %s=%q: want 1 or 0 (true or false)", name, v)
		}
		return b, nil
	}
	var e cudaEnv
	var err error
	if e.tf32, err = parse("GODDP_ALLOW_TF32", false); err != nil {
		return e, err
	}
	if e.cudnn, err = parse("GODDP_CUDNN", true); err != nil {
		return e, err
	}
	if e.cudnnBenchmark, err = parse("GODDP_CUDNN_BENCHMARK", false); err != nil {
		return e, err
	}
	e.opTimes, err = parse("GODDP_CUDA_OP_TIMES", false)
	return e, err
}

// releaseCopies gives back the device memory of the tensors toDevice made
// for dev (not those the loader already put there) once the step or the
// evaluation batch is done with them: the trainer made them and nothing
// else holds them, and on a device their blocks would otherwise wait for
// the garbage collector (a convnet's batch of 64 images is 200 KB a step).
func releaseCopies(host, dev data.Batch) {
	for _, p := range [][2]*tensor.Tensor{{host.Inputs, dev.Inputs}, {host.Targets, dev.Targets}} {
		if p[1] != nil && p[1] != p[0] && !p[1].IsCPU() {
			tensor.ReleaseScratch(p[1])
		}
	}
}

// toDevice moves a batch's tensors to dev (labels stay on the host: the
// loss kernels take them as arguments).
func toDevice(b data.Batch, dev tensor.Device) (data.Batch, error) {
	if tensor.IsCPU(dev) {
		return b, nil
	}
	var err error
	if b.Inputs != nil && b.Inputs.DType() != tensor.Int64 { // int64 ids stay on the host, as targets below
		if b.Inputs, err = b.Inputs.To(dev); err != nil {
			return b, fmt.Errorf("trainer: batch inputs to %v: %w", dev, err)
		}
	}
	// Int64 targets (class indices, token ids) stay on the host, where
	// int64 tensors live: the loss ops that take them upload what they need.
	if b.Targets != nil && b.Targets.DType() != tensor.Int64 {
		if b.Targets, err = b.Targets.To(dev); err != nil {
			return b, fmt.Errorf("trainer: batch targets to %v: %w", dev, err)
		}
	}
	return b, nil
}
