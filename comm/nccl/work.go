package nccl

import "github.com/goddp/goddp/comm/backend"

// work is the future every op returns: backend.Future, completed exactly once.
type work = backend.Future

func newWork() *work { return backend.NewFuture() }

func failed(err error) *work { return backend.FailedFuture(err) }
