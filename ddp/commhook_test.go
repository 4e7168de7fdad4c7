package ddp

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/tensor"
)

// TestCompressionHookErrorBounds drives the hooks directly on pre-divided
// buckets whose values span many magnitudes and checks every element against
// the exact average: each rank's value is rounded once to the 16-bit format
// and the sum once more, so |err| <= u*(sum|x_r|/W + |mean|) + tiny, with u
// = 2^-11 (fp16) or 2^-8 (bf16).
func TestCompressionHookErrorBounds(t *testing.T) {
	const world, n = 3, 4096
	tests := []struct {
		name string
		hook CommHook
		u    float64
		tiny float64 // absolute slack: fp16 flushes below its subnormals
		mag  float64 // largest magnitude (fp16 overflows at 65504)
	}{
		{"fp16", FP16CompressHook(), math.Ldexp(1, -11), math.Ldexp(1, -24), 1e3},
		{"bf16", BF16CompressHook(), math.Ldexp(1, -8), 0, 1e30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals := make([][]float32, world)
			for r := range vals {
				rng := tensor.NewRNG(uint64(r + 1))
				vals[r] = make([]float32, n)
				for i := range vals[r] {
					// Log-uniform magnitude in [1e-6, mag], random sign.
					m := math.Exp(math.Log(1e-6) + rng.Float64()*(math.Log(tc.mag)-math.Log(1e-6)))
					if rng.Float64() < 0.5 {
						m = -m
					}
					vals[r][i] = float32(m)
				}
			}
			got := make([][]float32, world)
			errs := runRanks(t, world, func(rank int, pg comm.ProcessGroup) error {
				b := &bucket{dtype: tensor.Float32, f32: make([]float32, n)}
				for i, v := range vals[rank] {
					b.f32[i] = v / world // what the reducer hands a hook
				}
				b.grad = GradBucket{DType: tensor.Float32, F32: b.f32, owner: b}
				for it := 0; it < 2; it++ { // the wire buffer is reused
					if err := tc.hook.Reduce(pg, &b.grad).Wait(context.Background()); err != nil {
						return err
					}
					if it == 0 {
						got[rank] = append([]float32(nil), b.f32...)
						for i, v := range vals[rank] {
							b.f32[i] = v / world
						}
					}
				}
				return nil
			})
			requireNoErrs(t, errs)
			for i := 0; i < n; i++ {
				var mean, abs float64
				for r := 0; r < world; r++ {
					mean += float64(vals[r][i]) / world
					abs += math.Abs(float64(vals[r][i])) / world
				}
				bound := tc.u*(abs+math.Abs(mean))*1.0001 + tc.tiny*world
				for r := 0; r < world; r++ {
					require.LessOrEqual(t, math.Abs(float64(got[r][i])-mean), bound, "elem %d rank %d: got %v want %v", i, r, got[r][i], mean)
				}
			}
		})
	}
}

func TestCustomCommHook(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{4}, {3}})
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return addAll(dot(n.params[0], constant(float32(rank), 4)), dot(n.params[1], constant(2, 3)))
		}
		var seen []int
		d, err := Wrap(context.Background(), net, pg, FirstBucketCapMB(1e-6))
		if err != nil {
			return err
		}
		d.RegisterCommHook(CommHookFunc(func(pg comm.ProcessGroup, b *GradBucket) comm.Work {
			seen = append(seen, b.Index)
			assert.Equal(t, b.IsLast, b.Index == 1)
			return pg.AllReduce(b.Buffer(), comm.Sum)
		}))
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		if err := loss.Backward(); err != nil {
			return err
		}
		assert.Equal(t, []int{0, 1}, seen)
		assert.Equal(t, []float32{0.5, 0.5, 0.5, 0.5}, f32s(net.params[0].Grad))
		assert.Equal(t, []float32{2, 2, 2}, f32s(net.params[1].Grad))
		return nil
	})
	requireNoErrs(t, errs)
}
