//go:build cgo

package devqueue_test

import (
	"fmt"
	"unsafe"

	"goddp/cuda/sim"
	"goddp/ddp"
	"goddp/ddp/devqueue"
)

// A device's queues as ddp uses them: an upload on the compute queue, a
// kernel on a second queue after an event, and the result back to the
// host after the compute queue waits for that queue's event.
func Example() {
	s := sim.New(0)
	defer s.Close()
	var dev devqueue.Device = ddp.SimDevice(s)
	m, _ := dev.Alloc(4 * 3)
	defer m.Free()
	compute, comm := dev.Compute(), dev.NewQueue("comm")
	x := []float32{1, 2, 3}
	compute.Upload(m, 0, unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 12))
	comm.Wait(compute.Record())
	comm.Scale(m, 0, 3, 0.5)
	compute.Wait(comm.Record())
	out := make([]float32, 3)
	compute.Download(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 12), m, 0)
	if err := compute.Synchronize(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(out)
	// Output: [0.5 1 1.5]
}
