package store_test

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/comm/store"
)

// Rank 0 hosts the store; every rank (here, the same process) dials it.
func ExampleListen() {
	ctx := context.Background()
	srv, err := store.Listen(ctx, "127.0.0.1:0", store.WithToken("0123456789abcdef-job-secret"))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	c, err := store.Dial(ctx, srv.Addr(), store.WithToken("0123456789abcdef-job-secret"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	job := store.NewPrefix("job1/", c)
	_ = job.Set(ctx, "addr/0", []byte("10.0.0.1:29400"))
	v, _ := job.Get(ctx, "addr/0")
	n, _ := job.Add(ctx, "arrived", 1)
	fmt.Println(string(v), n)
	// Output: 10.0.0.1:29400 1
}
