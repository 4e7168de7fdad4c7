package backend_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/goddp/goddp/comm/backend"
)

// A backend's ops return Futures; Wait gives every waiter the same result.
func ExampleFuture() {
	f := backend.NewFuture()
	go f.Complete(&backend.OpError{Kind: backend.ErrPeerFailed, Op: "allreduce", Seq: 7, Bytes: 64, Rank: 0, Peers: []int{3}})
	err := f.Wait(context.Background())
	var oe *backend.OpError
	fmt.Println(errors.Is(err, backend.ErrPeerFailed), errors.As(err, &oe) && oe.Peers[0] == 3)
	fmt.Println(err)
	// Output:
	// true true
	// comm: peer failed: allreduce #7 (64 bytes) on rank 0
}
