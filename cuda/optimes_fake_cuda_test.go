//go:build cuda

package cuda

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// StartOpTimes records each call the tensor device queues, by kernel or
// by product shape and operand alignment, with a wait for the stream
// before and after it; stop ends the recording.
func TestStartOpTimes(t *testing.T) {
	c, f := newFake(t)
	dev := c.Tensors()
	a, err := tensor.ZerosOn(dev, tensor.Float32, 2, 3)
	require.NoError(t, err)
	k := tensor.KernelsOf("test", a)
	stop := c.StartOpTimes()
	f.mu.Lock()
	before := len(f.calls)
	f.mu.Unlock()
	k.Fill(a, 1)
	k.Fill(a, 2)
	k.Gemm(false, true, 2, 2, 3, 1, a, 3, a, 3, 0, a, 2)
	ops := stop()
	k.Fill(a, 3) // after stop: not recorded
	names := map[string]int64{}
	for _, o := range ops {
		names[o.Name] = o.Calls
		assert.GreaterOrEqual(t, o.Time, o.Host, o.Name)
	}
	assert.Equal(t, int64(2), names["fill_f32"], "%v", ops)
	var gemm string
	for n := range names {
		if strings.HasPrefix(n, "sgemm NT 2x2x3 @") {
			gemm = n
		}
	}
	assert.NotEmpty(t, gemm, "%v", ops)
	assert.Len(t, ops, 2)
	f.mu.Lock()
	calls := f.calls[before:]
	f.mu.Unlock()
	// sync, launch, sync for each timed call; the last fill is not waited for.
	require.GreaterOrEqual(t, len(calls), 8)
	assert.Equal(t, []string{"sync", "launch fill_f32", "sync", "sync", "launch fill_f32", "sync", "sync"}, calls[:7])
	assert.Equal(t, "launch fill_f32", calls[len(calls)-1])
	assert.Equal(t, "sync", calls[len(calls)-2])
}
