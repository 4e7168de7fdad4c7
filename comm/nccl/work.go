package nccl

import "goddp/comm"

// work is the future every op returns: comm.Future, completed exactly once.
type work = comm.Future

func newWork() *work { return comm.NewFuture() }

func failed(err error) *work { return comm.FailedFuture(err) }
