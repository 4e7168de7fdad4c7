package tensor

import (
	bin "encoding/binary"
	"fmt"
	"math"
)

// RNG is torch's CPU generator: NewRNG(s) draws exactly what
// torch.Generator().manual_seed(s) draws (and what the global generator draws
// after torch.manual_seed(s)) through the same operations: rand, uniform_,
// randn, normal_, randint, random_, randperm and bernoulli_ (torch 1.13, CPU;
// see docs/reproducibility.md for the float32 normal_ caveat). Underneath is
// mt19937 with torch's seeding, and torch's transforms: a float32 uniform
// takes the low 24 bits of one 32-bit draw, a float64 uniform the low 53 bits
// of a 64-bit draw (high word first).
//
// There is no global generator: whoever needs randomness holds an RNG, so
// runs are reproducible, and State/SetState checkpoint it in the byte format
// of torch's Generator.get_state/set_state. An RNG is not safe for
// concurrent use.
type RNG struct {
	mt mt19937
	// torch caches the second value of a scalar Box-Muller pair.
	nextF64    float64
	hasNextF64 bool
	nextF32    float32
	hasNextF32 bool
}

// NewRNG returns a generator seeded with seed (torch's manual_seed).
func NewRNG(seed uint64) *RNG {
	g := &RNG{}
	g.ManualSeed(seed)
	return g
}

// ManualSeed reseeds the generator and drops any cached normal value, as
// torch's Generator.manual_seed.
func (g *RNG) ManualSeed(seed uint64) {
	g.mt.init(seed)
	g.hasNextF64, g.hasNextF32 = false, false
	g.nextF64, g.nextF32 = 0, 0
}

// InitialSeed returns the seed last set (torch's initial_seed).
func (g *RNG) InitialSeed() uint64 { return g.mt.seed }

// Random returns the next 32-bit output (torch's CPUGeneratorImpl::random).
func (g *RNG) Random() uint32 { return g.mt.uint32() }

// Random64 returns two 32-bit outputs joined, the first as the high word
// (torch's CPUGeneratorImpl::random64).
func (g *RNG) Random64() uint64 {
	hi := g.mt.uint32()
	lo := g.mt.uint32()
	return uint64(hi)<<32 | uint64(lo)
}

// Uint64 returns a uniformly distributed 64-bit value (Random64).
func (g *RNG) Uint64() uint64 { return g.Random64() }

// Float64 returns a uniform value in [0, 1) as torch draws one float64
// element: 53 bits of Random64.
func (g *RNG) Float64() float64 { return float64(g.Random64()&(1<<53-1)) * 0x1p-53 }

// Float64s fills dst with successive Float64 values: the same values, in
// the same order, as len(dst) calls of Float64.
func (g *RNG) Float64s(dst []float64) { g.mt.uniform64(dst) }

// DropoutF32 writes torch's dropout of x with keep probability keep and
// scale (1/keep): per element one Float64 draw, in order, as
// bernoulli_(keep) draws it; kept where the draw is below keep (mask =
// scale, y = x·scale), dropped elsewhere (mask = 0, y = x·0, NaN for an
// infinite x, as torch's x·mask). keep = 0 draws nothing. y and mask must
// be as long as x. The draws and the masking run in one pass (in C where
// cgo is): drawing blocks and masking in Go took three times as long
// (autograd's BenchmarkDropout).
func (g *RNG) DropoutF32(y, mask, x []float32, keep float64, scale float32) {
	if dropoutArgs("DropoutF32", y, mask, x, keep) {
		g.mt.dropoutF32(y, mask, x, keep, scale)
	}
}

// DropoutF64 is DropoutF32 for float64, in Go.
func (g *RNG) DropoutF64(y, mask, x []float64, keep, scale float64) {
	if dropoutArgs("DropoutF64", y, mask, x, keep) {
		mtDropout(&g.mt, y, mask, x, keep, scale)
	}
}

// dropoutArgs checks the lengths, handles keep = 0 (nothing kept, nothing
// drawn) and reports whether the draws are still to do.
func dropoutArgs[T float](op string, y, mask, x []T, keep float64) bool {
	if len(y) != len(x) || len(mask) != len(x) {
		panic(fmt.Sprintf("tensor: RNG.%s: lengths y %d, mask %d, x %d", op, len(y), len(mask), len(x)))
	}
	if keep > 0 {
		return true
	}
	for i, v := range x {
		mask[i], y[i] = 0, v*0
	}
	return false
}

// Float32 returns a uniform value in [0, 1) as torch draws one float32
// element: 24 bits of Random.
func (g *RNG) Float32() float32 { return float32(g.Random()&(1<<24-1)) * 0x1p-24 }

// NormFloat64 returns a standard normal value as torch's scalar path draws
// it (at::normal_distribution<double>): Box-Muller on two float64 uniforms,
// returning the cosine branch and caching the sine branch for the next call.
func (g *RNG) NormFloat64() float64 {
	if g.hasNextF64 {
		g.hasNextF64 = false
		return g.nextF64
	}
	u1 := g.Float64()
	u2 := g.Float64()
	r := math.Sqrt(-2 * libmLog(1-u2))
	theta := 2 * math.Pi * u1
	g.nextF64, g.hasNextF64 = r*libmSin(theta), true
	return r * libmCos(theta)
}

// IntN returns a uniform int in [0, n) as torch.randint(0, n) draws one
// element: Random() % n, or Random64() % n when n ≥ 2³². n must be positive.
func (g *RNG) IntN(n int) int {
	if n <= 0 {
		panic(fmt.Sprintf("tensor: RNG.IntN: n = %d", n))
	}
	return int(g.intFromTo(uint64(n), 0))
}

func (g *RNG) intFromTo(rng uint64, base int64) int64 {
	if rng >= 1<<32 {
		return int64(g.Random64()%rng) + base
	}
	return int64(uint64(g.Random())%rng) + base
}

// RandInt returns n values uniform in [low, high), as
// torch.randint(low, high, (n,), dtype=torch.int64).
func (g *RNG) RandInt(low, high int64, n int) []int64 {
	if high <= low {
		panic(fmt.Sprintf("tensor: RNG.RandInt: empty range [%d, %d)", low, high))
	}
	out := make([]int64, n)
	rng := uint64(high - low)
	for i := range out {
		out[i] = g.intFromTo(rng, low)
	}
	return out
}

// Perm returns torch.randperm(n): the identity, then for each i < n-1 a swap
// of positions i and i + Random() % (n-i).
func (g *RNG) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := 0; i < n-1; i++ {
		z := int(uint64(g.Random()) % uint64(n-i))
		p[i], p[z+i] = p[z+i], p[i]
	}
	return p
}

// Shuffle permutes n elements via swap in randperm's order of swaps.
func (g *RNG) Shuffle(n int, swap func(i, j int)) {
	for i := 0; i < n-1; i++ {
		z := int(uint64(g.Random()) % uint64(n-i))
		if z != 0 {
			swap(i, z+i)
		}
	}
}

// torchStateLen is sizeof(CPUGeneratorImplState) on 64-bit platforms.
const torchStateLen = 5056

// State returns the generator's state in the layout of torch's
// Generator.get_state(): torch.Generator().set_state(torch.tensor(list(b),
// dtype=torch.uint8)) continues the same stream, and so does SetState.
func (g *RNG) State() []byte {
	b := make([]byte, torchStateLen)
	le := bin.LittleEndian
	le.PutUint64(b[0:], g.mt.seed)
	le.PutUint32(b[8:], uint32(g.mt.left))
	le.PutUint32(b[12:], 1) // seeded
	le.PutUint64(b[16:], uint64(g.mt.next))
	for i, s := range g.mt.state {
		le.PutUint64(b[24+8*i:], uint64(s))
	}
	const tail = 24 + 8*mtN // normal_x, normal_y, normal_rho, normal_is_valid
	if g.hasNextF64 {
		le.PutUint64(b[tail+8:], math.Float64bits(g.nextF64))
		le.PutUint32(b[tail+24:], 1)
	}
	if g.hasNextF32 {
		le.PutUint32(b[tail+32:], math.Float32bits(g.nextF32))
		b[tail+36] = 1
	}
	return b
}

// SetState restores a state produced by State or by torch's get_state().
func (g *RNG) SetState(state []byte) error {
	if len(state) != torchStateLen {
		return fmt.Errorf("tensor: RNG.SetState: state is %d bytes, want %d (torch's CPU generator state)", len(state), torchStateLen)
	}
	le := bin.LittleEndian
	left, seeded, next := int32(le.Uint32(state[8:])), le.Uint32(state[12:]), le.Uint64(state[16:])
	if seeded == 0 || left <= 0 || left > mtN || next > mtN {
		return fmt.Errorf("tensor: RNG.SetState: invalid mt19937 state (left %d, next %d, seeded %d)", left, next, seeded)
	}
	var m mt19937
	m.seed, m.left, m.next = le.Uint64(state[0:]), left, uint32(next)
	for i := range m.state {
		m.state[i] = uint32(le.Uint64(state[24+8*i:]))
	}
	const tail = 24 + 8*mtN
	g.mt = m
	g.hasNextF64 = le.Uint32(state[tail+24:]) != 0
	g.nextF64 = 0
	if g.hasNextF64 {
		g.nextF64 = math.Float64frombits(le.Uint64(state[tail+8:]))
	}
	g.hasNextF32 = state[tail+36] != 0
	g.nextF32 = 0
	if g.hasNextF32 {
		g.nextF32 = math.Float32frombits(le.Uint32(state[tail+32:]))
	}
	return nil
}

// Uniform returns a tensor of values drawn from [lo, hi) as torch's
// uniform_(lo, hi) on a tensor of that dtype and shape.
func (g *RNG) Uniform(dt DType, lo, hi float64, shape ...int) *Tensor {
	t := New(dt, shape...)
	g.FillUniform(t, lo, hi)
	return t
}

// FillUniform overwrites the contiguous tensor t as torch's t.uniform_(lo, hi):
// in float32, from + x·(to-from) with x = 24 random bits / 2²⁴ and the
// bounds rounded to float32 first, in one fused multiply-add as torch's AVX2
// kernel computes it; in float64 the same with 53 bits.
func (g *RNG) FillUniform(t *Tensor, lo, hi float64) {
	mustContiguous(t, "FillUniform")
	if t.dtype == Float64 {
		d, w := t.F64(), hi-lo
		for i := range d {
			d[i] = math.FMA(g.Float64(), w, lo)
		}
		return
	}
	d, from, to := t.F32(), float32(lo), float32(hi)
	w := to - from
	for i := range d {
		d[i] = fma32(g.Float32(), w, from)
	}
}

// Normal returns a tensor of normal values drawn as torch's normal_(mean,
// std) on a tensor of that dtype and shape.
func (g *RNG) Normal(dt DType, mean, std float64, shape ...int) *Tensor {
	t := New(dt, shape...)
	g.FillNormal(t, mean, std)
	return t
}

// FillNormal overwrites the contiguous tensor t as torch's t.normal_(mean,
// std). Like torch it takes one of two paths by size: below 16 elements each
// value comes from the scalar Box-Muller (NormFloat64, sharing its cache);
// from 16 on, torch first draws one uniform per element, transforms blocks
// of 16 (the first 8 are the radii's sources, the next 8 the angles'), and
// when the size is not a multiple of 16 draws 16 fresh uniforms for the last
// 16 elements and transforms them again. float32 uses the AVX2 kernel's
// arithmetic (see avxmath.go), float64 the C library's log/sin/cos.
func (g *RNG) FillNormal(t *Tensor, mean, std float64) {
	mustContiguous(t, "FillNormal")
	if !(std >= 0) {
		panic(fmt.Sprintf("tensor: FillNormal: std %v must be non-negative", std))
	}
	n := t.Numel()
	if n < 16 {
		if t.dtype == Float64 {
			d := t.F64()
			for i := range d {
				d[i] = math.FMA(g.NormFloat64(), std, mean)
			}
		} else {
			d := t.F32()
			for i := range d {
				d[i] = float32(math.FMA(g.NormFloat64(), std, mean))
			}
		}
		return
	}
	if t.dtype == Float64 {
		d := t.F64()
		for i := range d {
			d[i] = g.Float64()
		}
		for i := 0; i+16 <= n; i += 16 {
			normalFill16F64(d[i:i+16], mean, std)
		}
		if n%16 != 0 {
			tail := d[n-16:]
			for i := range tail {
				tail[i] = g.Float64()
			}
			normalFill16F64(tail, mean, std)
		}
		return
	}
	d := t.F32()
	m32, s32 := float32(mean), float32(std)
	for i := range d {
		d[i] = g.Float32()
	}
	for i := 0; i+16 <= n; i += 16 {
		normalFill16AVX(d[i:i+16], m32, s32)
	}
	if n%16 != 0 {
		tail := d[n-16:]
		for i := range tail {
			tail[i] = g.Float32()
		}
		normalFill16AVX(tail, m32, s32)
	}
}

// normalFill16F64 is torch's normal_fill_16<double>.
func normalFill16F64(d []float64, mean, std float64) {
	for j := range 8 {
		u1 := 1 - d[j]
		u2 := d[j+8]
		radius := math.Sqrt(-2 * libmLog(u1))
		theta := 2 * math.Pi * u2
		d[j] = math.FMA(radius*libmCos(theta), std, mean)
		d[j+8] = math.FMA(radius*libmSin(theta), std, mean)
	}
}

// Bernoulli returns a tensor of 1s (probability p) and 0s drawn as torch's
// bernoulli_(p): one float64 uniform per element, 1 when it is below p.
func (g *RNG) Bernoulli(dt DType, p float64, shape ...int) *Tensor {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("tensor: RNG.Bernoulli: p = %v outside [0, 1]", p))
	}
	t := New(dt, shape...)
	if dt == Float64 {
		for i := range t.f64 {
			if g.Float64() < p {
				t.f64[i] = 1
			}
		}
		return t
	}
	for i := range t.f32 {
		if g.Float64() < p {
			t.f32[i] = 1
		}
	}
	return t
}

// RandomInts returns torch's random_() on a tensor of the given dtype and
// shape: integers uniform over [0, 2^digits], digits being 24 for float32
// and 53 for float64 (Random() % (2²⁴+1), Random64() % (2⁵³+1)).
func (g *RNG) RandomInts(dt DType, shape ...int) *Tensor {
	t := New(dt, shape...)
	if dt == Float64 {
		for i := range t.f64 {
			t.f64[i] = float64(g.Random64() % (1<<53 + 1))
		}
		return t
	}
	for i := range t.f32 {
		t.f32[i] = float32(uint64(g.Random()) % (1<<24 + 1))
	}
	return t
}

// RandomInt64 returns torch's random_() on an int64 tensor of n elements:
// Random64() % 2⁶³.
func (g *RNG) RandomInt64(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(g.Random64() % (1 << 63))
	}
	return out
}

func mustContiguous(t *Tensor, op string) {
	if !t.IsContiguous() {
		panic(fmt.Sprintf("tensor: %s: tensor of shape %v is not contiguous", op, t.Shape()))
	}
}

// Rand returns a tensor of values uniform in [0, 1) drawn from rng
// (torch.rand).
func Rand(rng *RNG, dt DType, shape ...int) *Tensor { return rng.Uniform(dt, 0, 1, shape...) }

// Randn returns a tensor of standard normal values drawn from rng
// (torch.randn).
func Randn(rng *RNG, dt DType, shape ...int) *Tensor { return rng.Normal(dt, 0, 1, shape...) }
