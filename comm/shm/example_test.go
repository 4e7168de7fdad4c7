package shm_test

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/shm"
)

// Settings come from the environment (shm.New) or from the caller.
func ExampleNewWithConfig() {
	ctx := context.Background()
	cfg := shm.Config{SlotBytes: 256 << 10, Async: "lazy"}
	pg, err := shm.NewWithConfig(ctx, backend.Options{Rank: 0, Size: 1, Store: commtest.NewStore()}, cfg)
	if err != nil {
		panic(err)
	}
	defer pg.Close()
	x := []float64{3, 4}
	err = pg.AllReduce(backend.Float64s(x), backend.Avg).Wait(ctx)
	fmt.Println(pg.Backend(), x, err)

	fmt.Println(shm.Config{NBuf: 1}.Validate())
	// Output:
	// shm [3 4] <nil>
	// comm: bad argument: shm: NBuf (GODDP_SHM_NBUF) = 1: want 0 (the default) or 2 to 64
}
