package comm

import (
	"context"
	"goddp/comm/internal/reduce"
	"testing"
	"time"
)

func BenchmarkShmOpOverhead(b *testing.B) {
	ctx := context.Background()
	g, err := newShmGroup(ctx, Options{Rank: 0, Size: 1, Store: newShmMemStore(), Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	x := Float32s(make([]float32, 1024))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.AllReduce(x, Sum).Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShmReduce4K(b *testing.B) {
	x := Float32s(make([]float32, 1024))
	y := Float32s(make([]float32, 1024))
	for i := 0; i < b.N; i++ {
		reduce.Into(x, y, Sum)
	}
}
