package comm_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/goddp/goddp/comm"
)

// Two ranks meet through a store that rank 0 hosts and all-reduce a
// gradient. A real job runs one rank per process and calls
// comm.InitFromEnv instead of building the Config by hand.
func Example() {
	srv, err := comm.ListenStore(context.Background(), "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	var wg sync.WaitGroup
	results := make([][]float32, 2)
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := comm.Config{
				Backend:     "tcp",
				InitMethod:  "tcp://" + srv.Addr(),
				StoreHosted: true, // the store above plays the launcher's
				Rank:        rank,
				WorldSize:   2,
				Timeout:     30 * time.Second,
			}
			pg, err := comm.Init(context.Background(), cfg)
			if err != nil {
				panic(err)
			}
			defer pg.Close()
			grad := []float32{float32(rank + 1), 10}
			if err := pg.AllReduce(comm.Float32s(grad), comm.Avg).Wait(context.Background()); err != nil {
				panic(err)
			}
			results[rank] = grad
		}()
	}
	wg.Wait()
	fmt.Println(results[0], results[1])
	// Output: [1.5 10] [1.5 10]
}

// A store is a small key-value service for rendezvous.
func ExampleDialStore() {
	ctx := context.Background()
	srv, _ := comm.ListenStore(ctx, "127.0.0.1:0", comm.WithToken("job-secret-0123456789"))
	defer srv.Close()
	s, err := comm.DialStore(ctx, srv.Addr(), comm.WithToken("job-secret-0123456789"))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	s.Set(ctx, "addr/0", []byte("10.0.0.1:4242"))
	n, _ := s.Add(ctx, "arrived", 1)
	v, _ := s.Get(ctx, "addr/0")
	fmt.Println(string(v), n)
	// Output: 10.0.0.1:4242 1
}

// Failures name the op and the rank at fault.
func ExampleOpError() {
	err := error(&comm.OpError{Kind: comm.ErrPeerFailed, Op: "allreduce", Seq: 57, Bytes: 4096, Rank: 0,
		Peers: []int{3}, Detail: "rank 3: connection closed (EOF): the peer process exited or was killed, or the connection was cut"})
	fmt.Println(err)
	// Output: comm: peer failed: allreduce #57 (4096 bytes) on rank 0: rank 3: connection closed (EOF): the peer process exited or was killed, or the connection was cut
}
