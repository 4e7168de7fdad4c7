//go:build cgo

package trainer

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/tensor"
)

func openSim(localRank int) (tensor.Device, func(), error) {
	d := sim.New(localRank)
	return d.Tensors(), func() { _ = d.Close() }, nil
}

// openCUDA is -device cuda: cuda:LOCAL_RANK's context as a tensor device.
// Without a usable GPU, NewContext's error names what is missing (the cuda
// build tag, the driver, a device, cuBLAS).
// GODDP_ALLOW_TF32, GODDP_CUDNN, GODDP_CUDNN_BENCHMARK and
// GODDP_CUDA_OP_TIMES set the context's
// switches (cudaSettings); which engine runs the convolutions is printed
// to stderr the first time each pass runs. Under GODDP_CUDA_OP_TIMES=1
// every call the device queues is timed (Context.StartOpTimes: a
// profiler, which slows the run) and the totals go to stderr when the
// device is released.
func openCUDA(localRank int) (tensor.Device, func(), error) {
	env, err := cudaSettings(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	c, err := cuda.NewContext(localRank)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): %w", localRank, err)
	}
	if err := c.SetAllowTF32(env.tf32); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): %w", localRank, err)
	}
	c.SetCUDNN(env.cudnn)
	c.SetCUDNNBenchmark(env.cudnnBenchmark)
	c.OnConvEngine(func(engine string) { fmt.Fprintln(os.Stderr, "trainer:", engine) })
	release := func() { _ = c.Close() }
	if env.opTimes {
		stop := c.StartOpTimes()
		release = func() {
			printOpTimes(os.Stderr, stop())
			_ = c.Close()
		}
	}
	return c.Tensors(), release, nil
}

// printOpTimes writes StartOpTimes' totals, most time first, with each
// call kind's share of the total.
func printOpTimes(w io.Writer, ops []cuda.OpTime) {
	var total time.Duration
	for _, o := range ops {
		total += o.Time
	}
	fmt.Fprintf(w, "device op times: %d kinds, %d ms in all\n", len(ops), total.Milliseconds())
	for _, o := range ops {
		calls := float64(max(o.Calls, 1))
		fmt.Fprintf(w, "  %5.1f%% %9.3f ms %7d calls %8.1f us/call (host %6.1f)  %s\n", 100*o.Time.Seconds()/max(total.Seconds(), 1e-12),
			float64(o.Time.Microseconds())/1000, o.Calls, float64(o.Time.Nanoseconds())/1000/calls, float64(o.Host.Nanoseconds())/1000/calls, o.Name)
	}
}
