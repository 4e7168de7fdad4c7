// Command gpuinfo says what goddp finds on this machine for GPU work: the
// CUDA driver and its devices, and which cuBLAS and NCCL files it would
// load, with their versions. It is the inventory of the GPU kit
// (scripts/gpu-kit.sh) and needs the cuda build tag for the cuBLAS part.
//
//	gpuinfo          the inventory; exit 0 when everything is usable
//	gpuinfo -count   only the number of visible GPUs (CUDA_VISIBLE_DEVICES
//	                 applied by the driver)
//
// Exit codes: 0 all found, 3 no NVIDIA GPU (no driver, or no device), 4 a
// GPU but a library is missing (cuBLAS or NCCL), 2 usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/internal/libfind"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }

func run(args []string, w io.Writer) int {
	fs := flag.NewFlagSet("gpuinfo", flag.ContinueOnError)
	count := fs.Bool("count", false, "print only the number of visible GPUs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	inf, cerr := cuda.Probe()
	noGPU := errors.Is(cerr, cuda.ErrNoDriver) || errors.Is(cerr, cuda.ErrNoDevice) || inf.DeviceCount == 0
	if *count {
		fmt.Fprintln(w, inf.DeviceCount)
		if noGPU {
			fmt.Fprintln(os.Stderr, "gpuinfo:", cerr)
			return 3
		}
		return 0
	}
	if errors.Is(cerr, cuda.ErrNotCompiled) {
		fmt.Fprintln(w, "gpuinfo: built without -tags cuda: cuBLAS is not probed")
	}
	fmt.Fprintf(w, "CUDA driver: %s, %d visible device(s) (CUDA_VISIBLE_DEVICES=%q)\n", version(inf.DriverVersion), inf.DeviceCount, os.Getenv("CUDA_VISIBLE_DEVICES"))
	if inf.CUBLASPath != "" {
		fmt.Fprintf(w, "cuBLAS: %s (%d.%d.%d)\n", resolve(inf.CUBLASPath), inf.CUBLASVersion/10000, inf.CUBLASVersion/100%100, inf.CUBLASVersion%100)
	}
	switch {
	case inf.CUDNNPath != "":
		fmt.Fprintf(w, "cuDNN: %s (%s): convolutions run on it\n", resolve(inf.CUDNNPath), cudnnVersion(inf.CUDNNVersion))
	case inf.CUDNNError != nil:
		fmt.Fprintf(w, "cuDNN: none, convolutions run goddp's own kernels: %v\n", inf.CUDNNError)
	}
	ninf, nerr := nccl.Probe()
	if ninf.NCCLPath != "" {
		fmt.Fprintf(w, "NCCL: %s (%d.%d.%d)\n", resolve(ninf.NCCLPath), ninf.NCCLVersion/10000, ninf.NCCLVersion/100%100, ninf.NCCLVersion%100)
	}
	fmt.Fprintln(w, "cuBLAS candidates, in order:")
	for _, p := range libfind.Candidates("GODDP_CUBLAS_LIBRARY", libfind.CUBLASSonames(inf.DriverVersion), libfind.Env{}) {
		fmt.Fprintln(w, "  ", p)
	}
	fmt.Fprintln(w, "cuDNN candidates, in order:")
	for _, p := range libfind.CandidatesSystemFirst("GODDP_CUDNN_LIBRARY", libfind.CUDNNSonames(), libfind.Env{}) {
		fmt.Fprintln(w, "  ", p)
	}
	fmt.Fprintln(w, "NCCL candidates, in order:")
	for _, p := range nccl.Candidates() {
		fmt.Fprintln(w, "  ", p)
	}
	err := errors.Join(cerr, nerr)
	if err != nil {
		fmt.Fprintln(w, "missing:", err)
	}
	switch {
	case noGPU:
		return 3
	case err != nil:
		return 4
	}
	return 0
}

// cudnnVersion renders cudnnGetVersion's 91900 as "9.19.0" (cuDNN 9
// counts major*10000, cuDNN 8 major*1000: 8907 is 8.9.7).
func cudnnVersion(v int) string {
	if v >= 90000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

// version renders cuDriverGetVersion's 12040 as "CUDA 12.4".
func version(v int) string {
	if v == 0 {
		return "unknown version"
	}
	return fmt.Sprintf("supports CUDA %d.%d", v/1000, v%1000/10)
}

// resolve shows where a soname or a link leads, with the file's own
// versioned name (libcublas.so.12 -> libcublas.so.12.4.5.8).
func resolve(p string) string {
	if filepath.IsAbs(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
			return p + " -> " + filepath.Base(r)
		}
	}
	return p
}
