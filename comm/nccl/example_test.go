package nccl_test

import (
	"errors"
	"fmt"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/nccl"
)

// Probe tells, before a job starts, whether this machine can run the nccl
// backend, and what is missing when it cannot.
func ExampleProbe() {
	info, err := nccl.Probe()
	switch {
	case errors.Is(err, nccl.ErrNoLibrary), errors.Is(err, nccl.ErrNoDriver), errors.Is(err, nccl.ErrNoDevice):
		fmt.Println("falling back to the tcp backend:", err)
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Printf("NCCL %d, %d GPU(s)\n", info.NCCLVersion, info.Devices)
	}
}

// Device memory goes through the DeviceCollectives of the group comm.Init
// returned; here ptr stands for a CUdeviceptr from a CUDA allocator.
func ExampleAsDevice() {
	var pg comm.ProcessGroup // from comm.Init with Backend "nccl"
	var ptr uintptr          // device memory holding 1024 float32 gradients
	if dc, ok := nccl.AsDevice(pg); ok {
		w := dc.AllReduceDevice(nccl.DeviceBuffer{DType: comm.Float32, Ptr: ptr, Count: 1024}, comm.Avg)
		_ = w // Wait on it before reading the gradients
	}
}
