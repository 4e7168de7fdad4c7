package cuda

import (
	"fmt"

	"goddp/tensor"
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
