// Command hierprobe runs a fixed series of collectives on the job it
// joins (comm.InitFromEnv) and prints, per collective, a hash of its
// result on every rank: "rank=R backend=B op=NAME hash=H sum=S". The
// inputs of the exact cases are small integers, so every backend must give
// the same bits; the random float all-reduce only rounds differently
// (sum lets a test compare it across backends).
package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"unsafe"

	"github.com/goddp/goddp/comm"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "hierprobe: %v\n", err)
		os.Exit(1)
	}
}

func hash(x []float32) uint64 {
	h := fnv.New64a()
	h.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*4))
	return h.Sum64()
}

func run() error {
	ctx := context.Background()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	r, w := pg.Rank(), pg.Size()
	report := func(op string, x []float32) {
		s := 0.0
		for _, v := range x {
			s += float64(v)
		}
		fmt.Printf("rank=%d backend=%s op=%s hash=%x sum=%.6g\n", r, pg.Backend(), op, hash(x), s)
	}
	ints := func(n, k int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((k*7+i*3)%5 - 2)
		}
		return x
	}
	for _, n := range []int{5, 1000, 3<<20 + 3} {
		x := ints(n, r)
		if err := pg.AllReduce(comm.Float32s(x), comm.Sum).Wait(ctx); err != nil {
			return err
		}
		report(fmt.Sprintf("allreduce-int-%d", n), x)
	}
	rng := rand.New(rand.NewPCG(uint64(r), 1))
	x := make([]float32, 1<<20+1)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	if err := pg.AllReduce(comm.Float32s(x), comm.Avg).Wait(ctx); err != nil {
		return err
	}
	report("allreduce-avg-random", x)
	b := ints(1<<18, r)
	if err := pg.Broadcast(comm.Float32s(b), w-1).Wait(ctx); err != nil {
		return err
	}
	report("broadcast", b)
	out := make([]float32, w*4099)
	if err := comm.AllGather(pg, comm.Float32s(out), comm.Float32s(ints(4099, r))).Wait(ctx); err != nil {
		return err
	}
	report("allgather", out)
	rs := make([]float32, 4099)
	if err := comm.ReduceScatter(pg, comm.Float32s(rs), comm.Float32s(ints(w*4099, r)), comm.Sum).Wait(ctx); err != nil {
		return err
	}
	report("reducescatter", rs)
	if math.IsNaN(float64(x[0])) {
		return fmt.Errorf("NaN")
	}
	return pg.Barrier().Wait(ctx)
}
