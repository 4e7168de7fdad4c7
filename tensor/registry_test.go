package tensor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testDevice is a registered kind for the registry's tests: a device
// without queues whose name carries the ordinal it was opened with.
type testDevice struct {
	cpuDevice
	n int
}

func (d testDevice) String() string { return fmt.Sprintf("testdev:%d", d.n) }

// Registered once per process, as a driver's init does.
func init() {
	RegisterDevice("testdev", func(n int) (Device, error) {
		if n == 9 {
			return nil, fmt.Errorf("no device 9")
		}
		return testDevice{n: n}, nil
	})
}

func TestOpenDevice(t *testing.T) {
	d, err := OpenDevice("cpu")
	require.NoError(t, err)
	assert.True(t, IsCPU(d))
	for name, want := range map[string]string{"testdev:3": "testdev:3", "testdev": "testdev:0"} {
		d, err := OpenDevice(name)
		require.NoError(t, err, name)
		assert.Equal(t, want, d.String())
	}
	for name, msg := range map[string]string{
		"nosuch:0":   `no driver for device "nosuch:0" (registered: cpu, `,
		"testdev:x":  "the ordinal must be a number",
		"testdev:-1": "the ordinal must be a number",
		"testdev:9":  "opening testdev:9: no device 9",
	} {
		_, err := OpenDevice(name)
		require.ErrorIs(t, err, ErrDevice, name)
		assert.Contains(t, err.Error(), msg, name)
	}
	assert.Contains(t, DeviceKinds(), "testdev")
	assert.Equal(t, "cpu", DeviceKinds()[0])
}

func TestRegisterDeviceRefuses(t *testing.T) {
	open := func(int) (Device, error) { return CPU(), nil }
	for _, kind := range []string{"testdev", "", "cpu", "a:b"} {
		assert.Panics(t, func() { RegisterDevice(kind, open) }, "kind %q", kind)
	}
	assert.Panics(t, func() { RegisterDevice("nildriver", nil) })
}

// queuedDevice offers queues, or fails to.
type queuedDevice struct {
	testDevice
	err error
}

func (d queuedDevice) Queues() (QueueDevice, error) { return nil, d.err }

func TestQueuesOf(t *testing.T) {
	_, ok, err := QueuesOf(CPU())
	assert.False(t, ok)
	assert.NoError(t, err)
	_, ok, err = QueuesOf(testDevice{})
	assert.False(t, ok, "a device without Queues")
	assert.NoError(t, err)
	_, ok, err = QueuesOf(queuedDevice{err: fmt.Errorf("%w: staged", ErrNoQueues)})
	assert.False(t, ok, "a device whose Queues says it has none")
	assert.NoError(t, err)
	_, ok, err = QueuesOf(queuedDevice{err: fmt.Errorf("stream creation failed")})
	assert.True(t, ok)
	assert.ErrorIs(t, err, ErrDevice)
	assert.ErrorContains(t, err, "queues of testdev:0: stream creation failed")
}
