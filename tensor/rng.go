package tensor

import (
	"fmt"
	"math/rand/v2"
)

// RNG is an explicit, seeded pseudo-random generator (PCG). There is no
// global generator: whoever needs randomness holds an RNG, so runs are
// reproducible and the state can be checkpointed with State/SetState.
// An RNG is not safe for concurrent use.
type RNG struct {
	pcg *rand.PCG
	r   *rand.Rand
}

// NewRNG returns a generator seeded with seed.
func NewRNG(seed uint64) *RNG {
	p := rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)
	return &RNG{pcg: p, r: rand.New(p)}
}

// Uint64 returns a uniformly distributed 64-bit value.
func (g *RNG) Uint64() uint64 { return g.pcg.Uint64() }

// Float64 returns a uniform value in [0, 1).
func (g *RNG) Float64() float64 { return float64(g.pcg.Uint64()>>11) * 0x1p-53 }

// float32 returns a uniform value in [0, 1) with 24 random bits.
func (g *RNG) float32() float32 { return float32(g.pcg.Uint64()>>40) * 0x1p-24 }

// NormFloat64 returns a standard normal value.
func (g *RNG) NormFloat64() float64 { return g.r.NormFloat64() }

// IntN returns a uniform int in [0, n); n must be positive.
func (g *RNG) IntN(n int) int {
	if n <= 0 {
		panic(fmt.Sprintf("tensor: RNG.IntN: n = %d", n))
	}
	return g.r.IntN(n)
}

// Perm returns a uniform random permutation of [0, n).
func (g *RNG) Perm(n int) []int { return g.r.Perm(n) }

// Shuffle permutes n elements via swap (Fisher–Yates).
func (g *RNG) Shuffle(n int, swap func(i, j int)) { g.r.Shuffle(n, swap) }

// State returns the generator's state; SetState on any RNG restores it.
func (g *RNG) State() []byte {
	b, err := g.pcg.MarshalBinary()
	if err != nil {
		// PCG's MarshalBinary cannot fail; keep the invariant loud.
		panic(fmt.Sprintf("tensor: RNG.State: %v", err))
	}
	return b
}

// SetState restores a state produced by State.
func (g *RNG) SetState(state []byte) error {
	if err := g.pcg.UnmarshalBinary(state); err != nil {
		return fmt.Errorf("tensor: RNG.SetState: %w", err)
	}
	return nil
}

// Uniform returns a tensor of values drawn uniformly from [lo, hi).
func (g *RNG) Uniform(dt DType, lo, hi float64, shape ...int) *Tensor {
	t := New(dt, shape...)
	if dt == Float64 {
		for i := range t.f64 {
			t.f64[i] = lo + (hi-lo)*g.Float64()
		}
		return t
	}
	l, w := float32(lo), float32(hi-lo)
	for i := range t.f32 {
		v := l + w*g.float32()
		if v >= float32(hi) && hi > lo { // rounding can land on hi in float32
			v = float32(lo)
		}
		t.f32[i] = v
	}
	return t
}

// Normal returns a tensor of normal values with the given mean and std.
func (g *RNG) Normal(dt DType, mean, std float64, shape ...int) *Tensor {
	t := New(dt, shape...)
	if dt == Float64 {
		for i := range t.f64 {
			t.f64[i] = mean + std*g.r.NormFloat64()
		}
		return t
	}
	for i := range t.f32 {
		t.f32[i] = float32(mean + std*g.r.NormFloat64())
	}
	return t
}

// Rand returns a tensor of values uniform in [0, 1) drawn from rng.
func Rand(rng *RNG, dt DType, shape ...int) *Tensor { return rng.Uniform(dt, 0, 1, shape...) }

// Randn returns a tensor of standard normal values drawn from rng.
func Randn(rng *RNG, dt DType, shape ...int) *Tensor { return rng.Normal(dt, 0, 1, shape...) }
