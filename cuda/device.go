package cuda

import (
	"fmt"
	"os"
	"strconv"

	"github.com/goddp/goddp/tensor"
)

// Device names where a tensor lives: the host (CPU) or GPU i (CUDA(i)).
// The zero value is CPU.
type Device struct{ gpu int } // gpu is the ordinal + 1; 0 means the host

// CPU is host memory: a *tensor.Tensor.
var CPU = Device{}

// CUDA returns GPU i (torch's "cuda:i").
func CUDA(i int) Device { return Device{gpu: i + 1} }

// IsCPU reports whether d is the host.
func (d Device) IsCPU() bool { return d.gpu == 0 }

// Ordinal is the GPU index, or -1 for the CPU.
func (d Device) Ordinal() int { return d.gpu - 1 }

func (d Device) String() string {
	if d.IsCPU() {
		return "cpu"
	}
	return fmt.Sprintf("cuda:%d", d.Ordinal())
}

// Value is a tensor on either side: a host *tensor.Tensor or a device
// *Tensor. Context.To converts between them.
type Value interface {
	Shape() []int
	DType() tensor.DType
}

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

// LocalDevice is the GPU this process should use: CUDA(LOCAL_RANK), as
// torch's cuda:LOCAL_RANK, or CUDA(0) without a launcher. The ordinal
// counts the devices CUDA_VISIBLE_DEVICES leaves visible, which the CUDA
// driver applies itself. A LOCAL_RANK that is not a number is an error.
func LocalDevice() (Device, error) {
	s := os.Getenv("LOCAL_RANK")
	if s == "" {
		return CUDA(0), nil
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return CPU, fmt.Errorf("cuda: LOCAL_RANK=%q is not a local rank", s)
	}
	return CUDA(r), nil
}
