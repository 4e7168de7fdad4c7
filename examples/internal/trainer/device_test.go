package trainer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"goddp/tensor"
)

func TestBackendForDevice(t *testing.T) {
	for _, tc := range []struct{ device, configured, want string }{
		{"cuda", "", "nccl"}, {"cuda", "auto", "nccl"}, {"cuda", "tcp", "tcp"},
		{"sim", "", ""}, {"sim", "auto", "auto"}, {"cpu", "", ""}, {"cpu", "shm", "shm"},
	} {
		require.Equal(t, tc.want, backendFor(tc.device, tc.configured), "%+v", tc)
	}
}

// -device cuda on a machine (or a build) without a usable GPU fails naming
// what is missing, before any rendezvous.
func TestOpenDevice(t *testing.T) {
	dev, release, err := openDevice("cpu", 0)
	require.NoError(t, err)
	require.True(t, tensor.IsCPU(dev))
	release()
	_, _, err = openDevice("cuda", 1)
	require.Error(t, err)
	require.Contains(t, err.Error(), "trainer: -device cuda (cuda:1): cuda: ")
	_, _, err = openDevice("tpu", 0)
	require.EqualError(t, err, `trainer: -device "tpu": want cpu, cuda or sim`)
}
