package cuda

import (
	"fmt"
	"os"
	"strconv"
)

// Info describes a Context's GPU and the libraries it loaded.
type Info struct {
	Ordinal       int    // CUDA ordinal (among CUDA_VISIBLE_DEVICES)
	Name          string // e.g. "NVIDIA H100 80GB HBM3"
	DriverVersion int    // cuDriverGetVersion: 12040 is CUDA 12.4
	DeviceCount   int    // devices CUDA sees
	CUBLASPath    string // what was loaded, e.g. ".../nvidia/cu13/lib/libcublas.so.13"
	CUBLASVersion int    // major*10000 + minor*100 + patch
	// Capability is the compute capability, {9, 0} on an H100.
	Capability [2]int
	// Kernels says which code of goddp's kernels was loaded: the machine
	// code built for the device's architecture ("sm_90 machine code") or
	// the PTX, JIT-compiled by the driver, and why.
	Kernels string
	// CUDNNPath and CUDNNVersion (cudnnGetVersion: 91900 is 9.19.0) are the
	// cuDNN loaded for convolutions; CUDNNError says why none was, and
	// convolutions then run goddp's own kernels (Context.ConvEngine).
	CUDNNPath    string
	CUDNNVersion int
	CUDNNError   error
}

// LocalOrdinal is the GPU this process should use: LOCAL_RANK, as
// torch's cuda:LOCAL_RANK, or 0 without a launcher. The ordinal counts the
// devices CUDA_VISIBLE_DEVICES leaves visible, which the CUDA driver
// applies itself. A LOCAL_RANK that is not a number is an error.
func LocalOrdinal() (int, error) {
	s := os.Getenv("LOCAL_RANK")
	if s == "" {
		return 0, nil
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return 0, fmt.Errorf("cuda: LOCAL_RANK=%q is not a local rank", s)
	}
	return r, nil
}
