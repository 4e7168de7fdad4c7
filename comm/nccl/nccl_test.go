package nccl_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/nccl"
)

// missing reports whether err says what is missing with one of the sentinels.
func missing(err error) bool {
	return errors.Is(err, nccl.ErrNoLibrary) || errors.Is(err, nccl.ErrNoDriver) ||
		errors.Is(err, nccl.ErrNoDevice) || errors.Is(err, nccl.ErrNoCgo)
}

// On a machine without NCCL or a GPU (like the one this was written on)
// Probe names what is missing; where both exist it reports them.
func TestProbe(t *testing.T) {
	info, err := nccl.Probe()
	if err == nil {
		t.Logf("NCCL %d with %d GPU(s): the missing-library path cannot be seen here", info.NCCLVersion, info.Devices)
		assert.Positive(t, info.Devices)
		return
	}
	t.Logf("Probe: %v", err)
	assert.True(t, missing(err), "error %q wraps no nccl sentinel", err)
	if errors.Is(err, nccl.ErrNoLibrary) {
		assert.Contains(t, err.Error(), "libnccl.so.2")
	}
	if errors.Is(err, nccl.ErrNoDriver) {
		assert.Contains(t, err.Error(), "libcuda.so.1")
	}
}

func fileStore(t *testing.T) comm.Store {
	t.Helper()
	s, err := comm.NewFileStore(filepath.Join(t.TempDir(), "store"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestNewErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		name     string
		opts     func() nccl.Options
		want     error
		contains string
	}{
		{"library not found", func() nccl.Options {
			return nccl.Options{Size: 1, Store: fileStore(t), LibraryPath: "/nonexistent/libnccl.so.2"}
		}, nccl.ErrNoLibrary, "/nonexistent/libnccl.so.2"},
		{"bad rank", func() nccl.Options { return nccl.Options{Rank: 2, Size: 2, Store: fileStore(t)} }, comm.ErrBadArgument, "rank 2 of 2"},
		{"no store", func() nccl.Options { return nccl.Options{Size: 1} }, comm.ErrBadArgument, "store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nccl.New(ctx, tc.opts())
			if errors.Is(err, nccl.ErrNoCgo) {
				t.Skip("built without cgo")
			}
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.contains)
		})
	}
}

// comm.Init with Backend "nccl" fails cleanly where there is no NCCL or GPU.
func TestInitWithoutGPU(t *testing.T) {
	if _, err := nccl.Probe(); err == nil {
		t.Skip("NCCL and a GPU are present; see TestGPUCollectives")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := comm.Init(ctx, comm.Config{Backend: "nccl", WorldSize: 1,
		InitMethod: "file://" + filepath.Join(t.TempDir(), "store")})
	require.Error(t, err)
	assert.True(t, missing(err), "error %q wraps no nccl sentinel", err)
	assert.Contains(t, err.Error(), `init backend "nccl"`)
}

// fakeDevice stands for an nccl group behind a wrapper.
type fakeDevice struct{ nccl.DeviceCollectives }

type wrapper struct{ comm.ProcessGroup }

func (w wrapper) Unwrap() comm.ProcessGroup { return w.ProcessGroup }

func TestAsDevice(t *testing.T) {
	f := fakeDevice{}
	for _, tc := range []struct {
		name string
		pg   comm.ProcessGroup
		ok   bool
	}{
		{"direct", f, true},
		{"wrapped twice", wrapper{wrapper{f}}, true},
		{"not nccl", wrapper{nil}, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := nccl.AsDevice(tc.pg)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

func TestDeviceBufferBytes(t *testing.T) {
	assert.Equal(t, 24, nccl.DeviceBuffer{DType: comm.Float64, Count: 3}.Bytes())
	assert.Equal(t, 6, nccl.DeviceBuffer{DType: comm.BFloat16, Count: 3}.Bytes())
}

type notNCCL struct{ comm.ProcessGroup }

func (notNCCL) Backend() string { return "tcp" }

// AllocDevice wants an nccl group and says so.
func TestAllocDeviceNeedsNCCL(t *testing.T) {
	_, _, err := nccl.AllocDevice(notNCCL{}, comm.Float32s([]float32{1}))
	if errors.Is(err, nccl.ErrNoCgo) {
		t.Skip("built without cgo")
	}
	require.ErrorIs(t, err, comm.ErrBadArgument)
	assert.Contains(t, err.Error(), `"tcp"`)
}
