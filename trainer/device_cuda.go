//go:build cgo

package trainer

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/tensor"
)

// configureCUDA sets the switches of dev's Context when dev is a cuda
// device and returns the device's release (closeDev, after printing the
// op times when they are on); other devices get closeDev as it is.
// GODDP_ALLOW_TF32, GODDP_CUDNN, GODDP_CUDNN_BENCHMARK and
// GODDP_CUDA_OP_TIMES set the context's switches (cudaSettings); which
// engine runs the convolutions is printed to stderr the first time each
// pass runs. Under GODDP_CUDA_OP_TIMES=1 every call the device queues is
// timed (Context.StartOpTimes: a profiler, which slows the run) and the
// totals go to stderr when the device is released.
func configureCUDA(dev tensor.Device, closeDev func()) (func(), error) {
	c, ok := cuda.Of(dev)
	if !ok {
		return closeDev, nil
	}
	env, err := cudaSettings(os.Getenv)
	if err != nil {
		return nil, err
	}
	if err := c.SetAllowTF32(env.tf32); err != nil {
		return nil, err
	}
	c.SetCUDNN(env.cudnn)
	c.SetCUDNNBenchmark(env.cudnnBenchmark)
	c.OnConvEngine(func(engine string) { fmt.Fprintln(os.Stderr, "trainer:", engine) })
	if !env.opTimes {
		return closeDev, nil
	}
	stop := c.StartOpTimes()
	return func() {
		printOpTimes(os.Stderr, stop())
		closeDev()
	}, nil
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
