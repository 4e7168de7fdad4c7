package shm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"goddp/comm/backend"
)

func TestZZExpVec(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	var prof struct{ Params [][2]json.RawMessage }
	raw, _ := os.ReadFile("../../cmd/ddpbench/profiles/resnet50.json")
	json.Unmarshal(raw, &prof)
	var sizes []int
	for _, p := range prof.Params {
		var shape []int
		json.Unmarshal(p[1], &shape)
		n := 1
		for _, d := range shape {
			n *= d
		}
		sizes = append(sizes, n)
	}
	shmWorld(t, 2, time.Minute, func(ctx context.Context, g backend.ProcessGroup) error {
		var pieces []backend.Buffer
		total := 0
		for _, n := range sizes {
			pieces = append(pieces, backend.Float32s(make([]float32, n)))
			total += n
		}
		whole := backend.Float32s(make([]float32, total))
		vr := g.(backend.VectorAllReducer)
		for round := 0; round < 3; round++ {
			for _, vec := range []bool{false, true} {
				var ts []float64
				for it := 0; it < 8; it++ {
					g.Barrier().Wait(ctx)
					t0 := time.Now()
					var err error
					if vec {
						err = vr.AllReduceV(pieces, backend.Avg).Wait(ctx)
					} else {
						err = g.AllReduce(whole, backend.Avg).Wait(ctx)
					}
					if err != nil {
						return err
					}
					ts = append(ts, float64(time.Since(t0).Microseconds())/1000)
				}
				sort.Float64s(ts)
				if g.Rank() == 0 {
					fmt.Printf("vec=%v median %.1f ms\n", vec, ts[4])
				}
			}
		}
		return nil
	})
}
