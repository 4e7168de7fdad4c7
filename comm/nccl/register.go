//go:build cgo

package nccl

import (
	"context"

	"github.com/goddp/goddp/comm/backend"
)

func init() { backend.Register("nccl", factory) }

// factory is the comm backend: one GPU per local rank (torch's convention).
func factory(ctx context.Context, o backend.Options) (backend.ProcessGroup, error) {
	return New(ctx, Options{
		Rank: o.Rank, Size: o.Size, Store: o.Store, Prefix: o.Prefix,
		Device: o.LocalRank, Timeout: o.Timeout, Logf: o.Logf,
	})
}
