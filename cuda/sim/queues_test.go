package sim_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/tensor"
)

// A device's queues as ddp uses them: an upload on the compute queue, a
// kernel on a second queue after an event, and the result back to the
// host after the compute queue waits for that queue's event.
func ExampleDevice_Queues() {
	s := sim.New(0)
	defer s.Close()
	dev := s.Queues()
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

// "sim:N" opens by name once the package is imported, and its tensor
// device leads to its queues (what ddp.Wrap uses), without naming sim.
func TestOpenByNameHasQueues(t *testing.T) {
	d, err := tensor.OpenDevice("sim:1")
	require.NoError(t, err)
	assert.Equal(t, "sim:1", d.String())
	s, ok := sim.Of(d)
	require.True(t, ok)
	defer s.Close()
	q, ok, err := tensor.QueuesOf(d)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, s.Queues(), q)
	x, err := tensor.FromF32([]float32{1, 2}, 2).To(d)
	require.NoError(t, err)
	_, isTQ := q.Compute().(tensor.TensorQueue)
	require.True(t, isTQ)
	assert.True(t, q.Compute().(tensor.TensorQueue).Holds(x))
}

// A host function must not block, so a queue refuses to wait for an event
// of another kind (it fails instead).
func TestQueueRefusesForeignEvent(t *testing.T) {
	s := sim.New(0)
	defer s.Close()
	q := s.Queues().NewQueue("comm")
	q.Wait(foreign{})
	assert.ErrorContains(t, q.Synchronize(), "cannot wait for a sim_test.foreign")
}

type foreign struct{}

func (foreign) Synchronize() {}
