package trainer

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/goddp/goddp/tensor"
)

// startCPUProfile starts Go's CPU profiler into path (path.rank<r> in a
// world of more than one, so that ranks sharing a directory do not
// overwrite each other) and returns the function that stops it and closes
// the file.
func startCPUProfile(path string, rank, world int) (func(), error) {
	if world > 1 {
		path = fmt.Sprintf("%s.rank%d", path, rank)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: -cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("trainer: -cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func kernelProfileIf(on bool) *tensor.KernelProfile {
	if !on {
		return nil
	}
	return tensor.NewKernelProfile()
}

// printKernelReport writes -kernel-profile's lines: the summary, a
// machine-readable line (scripts/bench_vs_anchors.sh reads it), and rank
// 0's kernels by time.
func printKernelReport(out io.Writer, r KernelReport) {
	fmt.Fprintf(out, "kernels: %d ranks spent %.1f%% of the measured %.2f s in matrix products, convolutions and fused attention; "+
		"their own rate %.1f GFLOPS, the steps' %.1f GFLOPS (all ranks)\n",
		r.Ranks, 100*r.KernelFraction(), r.Measured.Seconds(), r.KernelGFLOPS(), r.StepGFLOPS())
	fmt.Fprintf(out, "kernel_profile kernel_pct=%.1f kernel_gflops=%.1f step_gflops=%.1f\n",
		100*r.KernelFraction(), r.KernelGFLOPS(), r.StepGFLOPS())
	fmt.Fprintf(out, "%-18s %-40s %8s %10s %8s %7s\n", "kernel (rank 0)", "shape", "calls", "ms", "GFLOPS", "of time")
	for _, s := range r.Kernels {
		fmt.Fprintf(out, "%-18s %-40s %8d %10.1f %8.1f %6.1f%%\n", s.Kernel, s.Shape, s.Calls,
			float64(s.Time)/1e6, s.GFLOPS(), 100*s.Time.Seconds()/r.Measured.Seconds())
	}
}
