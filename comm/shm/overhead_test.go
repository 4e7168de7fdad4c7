package shm

import (
	"context"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/internal/reduce"
	"testing"
	"time"
)

func BenchmarkShmOpOverhead(b *testing.B) {
	ctx := context.Background()
	g, err := New(ctx, backend.Options{Rank: 0, Size: 1, Store: commtest.NewStore(), Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	x := backend.Float32s(make([]float32, 1024))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.AllReduce(x, backend.Sum).Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShmReduce4K(b *testing.B) {
	x := backend.Float32s(make([]float32, 1024))
	y := backend.Float32s(make([]float32, 1024))
	for i := 0; i < b.N; i++ {
		reduce.Into(x, y, backend.Sum)
	}
}
