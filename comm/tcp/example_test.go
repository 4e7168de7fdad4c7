package tcp_test

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/tcp"
)

// Settings come from the environment (tcp.New) or from the caller.
func ExampleNewWithConfig() {
	ctx := context.Background()
	cfg := tcp.Config{PieceBytes: 256 << 10, Congestion: "system"}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	pg, err := tcp.NewWithConfig(ctx, backend.Options{Rank: 0, Size: 1, Store: commtest.NewStore()}, cfg)
	if err != nil {
		panic(err)
	}
	defer pg.Close()
	x := []float32{1, 2}
	err = pg.AllReduce(backend.Float32s(x), backend.Sum).Wait(ctx)
	fmt.Println(pg.Backend(), x, err)

	bad := tcp.Config{SocketBuffer: -1}
	fmt.Println(bad.Validate())
	// Output:
	// tcp [1 2] <nil>
	// comm: bad argument: tcp: SocketBuffer (GODDP_TCP_BUFFER) = -1: want 0 (the default) or 4096 bytes to 1 GiB
}
