package trainer

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/data"
	_ "github.com/goddp/goddp/devices" // the cuda and sim drivers, as the examples link them
	"github.com/goddp/goddp/tensor"
)

func TestBackendForDevice(t *testing.T) {
	for _, tc := range []struct{ device, configured, want string }{
		{"cuda", "", "nccl"}, {"cuda", "auto", "nccl"}, {"cuda", "tcp", "tcp"},
		{"sim", "", ""}, {"sim", "auto", "auto"}, {"cpu", "", ""}, {"cpu", "shm", "shm"},
		// An explicit device may be shared by several ranks, which NCCL
		// refuses: the configured backend (auto: shm on one host) stays.
		{"cuda:0", "", ""}, {"cuda:0", "shm", "shm"},
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
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.Contains(t, err.Error(), `trainer: -device "cuda": tensor: device: opening cuda:1: cuda: `)
	_, _, err = openDevice("tpu", 0)
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.Contains(t, err.Error(), `trainer: -device "tpu": tensor: device: no driver for device "tpu:0" (registered: cpu, cuda, sim;`)
	// cuda:N names the device whatever the local rank.
	_, _, err = openDevice("cuda:3", 0)
	require.Error(t, err)
	require.Contains(t, err.Error(), `trainer: -device "cuda:3": tensor: device: opening cuda:3: cuda: `)
	_, _, err = openDevice("cuda:x", 0)
	require.ErrorContains(t, err, `trainer: -device "cuda:x": tensor: device: device "cuda:x": the ordinal must be a number >= 0`)
	// sim and sim:N open through the registry: sim registered itself
	// (goddp/devices, imported below, links it), the trainer names no
	// driver.
	for name, want := range map[string]string{"sim:1": "sim:1", "sim": "sim:2"} {
		dev, release, err = openDevice(name, 2)
		require.NoError(t, err, name)
		require.Equal(t, want, dev.String())
		release()
		require.Error(t, dev.Synchronize(), "%s: release closed the device", name)
	}
}

// GODDP_ALLOW_TF32, GODDP_CUDNN_BENCHMARK and GODDP_CUDA_OP_TIMES are off and GODDP_CUDNN on
// unless set; anything but a boolean names the variable.
func TestCUDASettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want cudaEnv
		err  string
	}{
		{env: nil, want: cudaEnv{cudnn: true}},
		{env: map[string]string{"GODDP_ALLOW_TF32": "1", "GODDP_CUDNN": "0"}, want: cudaEnv{tf32: true}},
		{env: map[string]string{"GODDP_ALLOW_TF32": "true"}, want: cudaEnv{tf32: true, cudnn: true}},
		{env: map[string]string{"GODDP_CUDA_OP_TIMES": "1"}, want: cudaEnv{cudnn: true, opTimes: true}},
		{env: map[string]string{"GODDP_CUDNN_BENCHMARK": "1"}, want: cudaEnv{cudnn: true, cudnnBenchmark: true}},
		{env: map[string]string{"GODDP_CUDNN_BENCHMARK": "fast"}, err: "GODDP_CUDNN_BENCHMARK"},
		{env: map[string]string{"GODDP_ALLOW_TF32": "yes"}, err: "GODDP_ALLOW_TF32"},
		{env: map[string]string{"GODDP_CUDNN": "off"}, err: "GODDP_CUDNN"},
		{env: map[string]string{"GODDP_CUDA_OP_TIMES": "on"}, err: "GODDP_CUDA_OP_TIMES"},
	} {
		got, err := cudaSettings(func(k string) string { return tc.env[k] })
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%v", tc.env)
			continue
		}
		require.NoError(t, err, "%v", tc.env)
		require.Equal(t, tc.want, got, "%v", tc.env)
	}
}

// GODDP_DEVICE_MEMORY_LIMIT caps a sim or cuda device's allocator; a value
// that is not a byte count names the variable.
func TestDeviceMemoryLimitEnv(t *testing.T) {
	for v, want := range map[string]int64{"": 0, "0": 0, "64M": 64 << 20, "2GiB": 2 << 30} {
		got, err := deviceMemoryLimit(func(string) string { return v })
		require.NoError(t, err, v)
		require.Equal(t, want, got, v)
	}
	_, err := deviceMemoryLimit(func(string) string { return "lots" })
	require.ErrorContains(t, err, `GODDP_DEVICE_MEMORY_LIMIT: bad size "lots"`)

	t.Setenv("GODDP_DEVICE_MEMORY_LIMIT", "64M")
	dev, release, err := openDevice("sim:0", 0)
	require.NoError(t, err)
	defer release()
	a, err := tensor.ZerosOn(dev, tensor.Float32, 12<<20) // 48 MiB
	require.NoError(t, err)
	_, err = tensor.ZerosOn(dev, tensor.Float32, 12<<20)
	require.ErrorContains(t, err, "would pass the limit of 67108864")
	runtime.KeepAlive(a)

	dev, release2, err := openDevice("cpu", 0)
	require.NoError(t, err, "the host has no device limit and ignores the variable")
	require.True(t, tensor.IsCPU(dev))
	release2()

	t.Setenv("GODDP_DEVICE_MEMORY_LIMIT", "-5")
	_, _, err = openDevice("sim:0", 0)
	require.ErrorContains(t, err, `trainer: -device "sim:0": GODDP_DEVICE_MEMORY_LIMIT: bad size "-5"`)
}

// The device copies toDevice makes of a batch go back to the device's
// cache when the step is done (releaseCopies); the host tensors, and a
// batch the loader already put on the device, are left alone.
func TestReleaseCopies(t *testing.T) {
	dev, release, err := openDevice("sim:0", 0)
	require.NoError(t, err)
	defer release()
	host := data.Batch{Inputs: tensor.Full(tensor.Float32, 2, 4, 300), Targets: tensor.Full(tensor.Float32, 1, 4, 3)}
	onDev, err := toDevice(host, dev)
	require.NoError(t, err)
	before, _ := tensor.MemoryStatsOf(dev)
	releaseCopies(host, onDev)
	after, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, before.Allocated-5120-64, after.Allocated, "both copies' blocks (4800 bytes in the 5120 class, 48 in the 64) went back")
	_, err = onDev.Inputs.To(tensor.CPU())
	require.ErrorContains(t, err, "released")
	require.Equal(t, float32(2), host.Inputs.F32()[1199], "the host batch is untouched")

	already, err := toDevice(host, dev)
	require.NoError(t, err)
	again, err := toDevice(already, dev) // a loader that yields device tensors
	require.NoError(t, err)
	releaseCopies(already, again)
	back, err := already.Inputs.To(tensor.CPU())
	require.NoError(t, err, "a batch that was on the device already is the caller's")
	require.Equal(t, float32(2), back.F32()[0])
}
