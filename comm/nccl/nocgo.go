//go:build !cgo

package nccl

import (
	"context"

	"github.com/goddp/goddp/comm/backend"
)

func init() {
	backend.Register("nccl", func(context.Context, backend.Options) (backend.ProcessGroup, error) { return nil, ErrNoCgo })
}

// Info is what Probe finds.
type Info struct {
	NCCLVersion int
	Devices     int
}

// Probe needs cgo to load NCCL; this build has none.
func Probe() (Info, error) { return Info{}, ErrNoCgo }

// New needs cgo to load NCCL; this build has none.
func New(ctx context.Context, opts Options) (backend.ProcessGroup, error) { return nil, ErrNoCgo }

// AllocDevice needs cgo; this build has none.
func AllocDevice(pg backend.ProcessGroup, init backend.Buffer) (DeviceBuffer, func() error, error) {
	return DeviceBuffer{}, nil, ErrNoCgo
}
