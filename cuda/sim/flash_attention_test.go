package sim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/tensor"
)

// The fused attention kernels (kernels.cu's flash_attn_*) against a naive
// float64 attention: softmax(scale·QKᵀ + causal mask)·V with the whole
// [T, T] matrix, and its gradient, for T not a multiple of the tile, D not
// a power of two, causal or not, bf16 or not, and launches of several
// block sizes and grids.

type flashCase struct {
	b, t, h, d    int
	causal, bf16  bool
	grid, threads int // 0: a block per tile of 64, as devtensor launches
}

func (c flashCase) String() string {
	return fmt.Sprintf("B%d_T%d_H%d_D%d_causal=%v_bf16=%v_grid%d_block%d", c.b, c.t, c.h, c.d, c.causal, c.bf16, c.grid, c.threads)
}

var flashCases = []flashCase{
	{b: 2, t: 1, h: 1, d: 8},
	{b: 1, t: 37, h: 3, d: 16},
	{b: 2, t: 130, h: 2, d: 64},
	{b: 1, t: 70, h: 1, d: 128},
}

// flashRef is the naive attention in float64 for qkv [B, T, 3, H, D] and
// dy [B, T, H, D]: y, lse [B, H, T] and dqkv. With bf16 the products'
// operands are rounded as the host kernel (tensor's
// cpu_flash_attention.go) rounds them: q, k, v, dy, the scores' gradient
// and the probabilities, in the forward FlashAttention's unnormalised
// e^(s - running maximum) with the maximum updated every flashKeyBlock
// keys.
func flashRef(qkv, dy []float32, b, t, h, d int, scale float64, causal, bf16 bool) (y, lse, dqkv []float64) {
	r := func(x float64) float64 {
		if !bf16 {
			return x
		}
		return float64(tensor.RoundBF16(float32(x)))
	}
	y, lse, dqkv = make([]float64, b*t*h*d), make([]float64, b*h*t), make([]float64, len(qkv))
	at := func(bi, i, part, hi, c int) int { return (((bi*t+i)*3+part)*h+hi)*d + c }
	yat := func(bi, i, hi, c int) int { return ((bi*t+i)*h+hi)*d + c }
	for bi := range b {
		for hi := range h {
			for i := range t {
				n := t
				if causal {
					n = i + 1
				}
				s := make([]float64, n)
				mk := make([]float64, n) // the running maximum key j's probability is taken at
				m := math.Inf(-1)
				for j := range n {
					for c := range d {
						s[j] += r(float64(qkv[at(bi, i, 0, hi, c)])) * r(float64(qkv[at(bi, j, 1, hi, c)]))
					}
					s[j] *= scale
				}
				for k0 := 0; k0 < n; k0 += flashKeyBlock {
					k1 := min(n, k0+flashKeyBlock)
					for j := k0; j < k1; j++ {
						m = math.Max(m, s[j])
					}
					for j := k0; j < k1; j++ {
						mk[j] = m
					}
				}
				var l float64
				for j := range n {
					l += math.Exp(s[j] - m)
				}
				lg := m + math.Log(l)
				lse[(bi*h+hi)*t+i] = lg
				for j := range n {
					pj := r(math.Exp(s[j]-mk[j])) * math.Exp(mk[j]-m) / l
					for c := range d {
						y[yat(bi, i, hi, c)] += pj * r(float64(qkv[at(bi, j, 2, hi, c)]))
					}
				}
				// The gradient: D = Σ dy·y, dS = P ⊙ (dP − D).
				var dd float64
				for c := range d {
					dd += r(float64(dy[yat(bi, i, hi, c)])) * y[yat(bi, i, hi, c)]
				}
				for j := range n {
					p := math.Exp(s[j] - lg)
					var dp float64
					for c := range d {
						g := r(float64(dy[yat(bi, i, hi, c)]))
						dp += g * r(float64(qkv[at(bi, j, 2, hi, c)]))
						dqkv[at(bi, j, 2, hi, c)] += r(p) * g
					}
					ds := r(p * (dp - dd))
					for c := range d {
						dqkv[at(bi, i, 0, hi, c)] += scale * ds * r(float64(qkv[at(bi, j, 1, hi, c)]))
						dqkv[at(bi, j, 1, hi, c)] += scale * ds * r(float64(qkv[at(bi, i, 0, hi, c)]))
					}
				}
			}
		}
	}
	return y, lse, dqkv
}

// flashKeyBlock is kernels.cu's FA_KB and tensor's flashTileK: the keys
// between the forward's running-maximum updates.
const flashKeyBlock = 128

// flashClose checks got against want elementwise within tol relative to
// the larger of |want| and want's RMS (a gradient element near zero is
// held to the size of its neighbours). With bf16 a few elements may be
// off by up to a bfloat16 unit (2^-8) of that size: a probability or a
// score's gradient that float32 and float64 (or two float32 orders of
// summation) put on either side of a bfloat16 rounding boundary rounds
// to neighbouring values, and its row's products differ by that unit.
// One flip moves a row of dq or dk (D elements); dropping a rounding
// shifts nearly every element past tol.
func flashClose(t *testing.T, want []float64, got []float32, tol float64, bf16 bool, what string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	var ss float64
	for _, v := range want {
		ss += v * v
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	flips := 0
	for i, w := range want {
		d := math.Abs(w-float64(got[i])) / max(math.Abs(w), rms)
		switch {
		case d <= tol:
		case bf16 && d <= 1.0/256:
			flips++
		default:
			t.Fatalf("%s: element %d of %d: got %v, want %v", what, i, len(want), got[i], w)
		}
	}
	if flips > len(want)/20 {
		t.Fatalf("%s: %d of %d elements off by more than %g (at most 5%% may be, by a bfloat16 rounding's flip)", what, flips, len(want), tol)
	}
}

// flashLaunch runs the forward and the backward kernels of c on sim
// buffers, as devtensor launches them, and returns y, lse and dqkv.
func flashLaunch(e *env, c flashCase, qkv, dy []float32, scale float32) (y, lse, dqkv []float32) {
	flag := func(b bool) uint64 {
		if b {
			return uint64(math.Float32bits(1))
		}
		return 0
	}
	threads := c.threads
	if threads == 0 {
		threads = 64
	}
	grid := c.grid
	if grid == 0 {
		grid = max(1, (c.t+threads-1)/threads*c.b*c.h)
	}
	n := c.b * c.t * c.h * c.d
	q, g := e.up(qkv), e.up(dy)
	yb, lb, db, dd := e.zeros(n), e.zeros(c.b*c.h*c.t), e.up(nanFilled(len(qkv))), e.zeros(c.b*c.h*c.t)
	dims := []uint64{uint64(c.b), uint64(c.t), uint64(c.h), uint64(c.d)}
	tail := []uint64{uint64(math.Float32bits(scale)), flag(c.causal), flag(c.bf16)}
	e.launch("flash_attn_fwd_f32", grid, threads, append(append([]uint64{yb.Ptr(), lb.Ptr(), q.Ptr()}, dims...), tail...)...)
	e.launch("flash_attn_bwd_dot_f32", 3, 32, append(append([]uint64{dd.Ptr(), g.Ptr(), yb.Ptr()}, dims...), flag(c.bf16))...)
	args := append(append([]uint64{db.Ptr(), g.Ptr(), q.Ptr(), lb.Ptr(), dd.Ptr()}, dims...), tail...)
	e.launch("flash_attn_bwd_f32", grid, threads, args...)
	e.launch("flash_attn_bwd_dq_f32", grid, threads, args...)
	return clone32(yb), clone32(lb), clone32(db)
}

// nanFilled is n NaNs: dqkv starts so, and every element must be written.
func nanFilled(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}

func clone32(b *sim.Buffer) []float32 { return append([]float32(nil), b.F32()...) }

func TestFlashAttentionKernels(t *testing.T) {
	e := newEnv(t)
	var cases []flashCase
	for _, c := range flashCases {
		for _, causal := range []bool{false, true} {
			for _, bf16 := range []bool{false, true} {
				c.causal, c.bf16 = causal, bf16
				cases = append(cases, c)
			}
		}
	}
	// Odd launches: one-thread blocks, blocks that are not a power of two
	// and grids smaller than the tiles (blocks loop over them).
	cases = append(cases, flashCase{b: 1, t: 37, h: 3, d: 16, causal: true, grid: 5, threads: 1},
		flashCase{b: 2, t: 37, h: 1, d: 12, causal: true, grid: 1, threads: 7},
		flashCase{b: 2, t: 37, h: 1, d: 12, bf16: true, grid: 2, threads: 33})
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			qkv := e.randn(c.b, c.t, 3, c.h, c.d).F32()
			dy := e.randn(c.b, c.t, c.h, c.d).F32()
			scale := 1 / math.Sqrt(float64(c.d))
			wy, wl, wd := flashRef(qkv, dy, c.b, c.t, c.h, c.d, scale, c.causal, c.bf16)
			gy, gl, gd := flashLaunch(e, c, qkv, dy, float32(scale))
			flashClose(t, wy, gy, 1e-4, c.bf16, "y")
			flashClose(t, wl, gl, 1e-4, c.bf16, "lse")
			flashClose(t, wd, gd, 1e-4, c.bf16, "dqkv")
		})
	}
}

// The device table's entries (goddp/cuda/devtensor's launches) on sim
// against the host's kernel (tensor.CPU()'s FlashAttention and
// FlashAttentionBackward, tiled GEMMs with the online softmax between
// them): y, lse and dqkv, each side's backward fed its own forward's y and
// lse, and dqkv starting as NaN on both, so that an element left unwritten
// shows.
func TestFlashAttentionMatchesCPU(t *testing.T) {
	dev := newDevice(t).Tensors()
	rng := tensor.NewRNG(31)
	for _, c := range flashCases {
		for _, causal := range []bool{false, true} {
			for _, bf16 := range []bool{false, true} {
				c.causal, c.bf16 = causal, bf16
				t.Run(c.String(), func(t *testing.T) {
					qkv := tensor.Randn(rng, tensor.Float32, c.b, c.t, 3, c.h, c.d)
					dy := tensor.Randn(rng, tensor.Float32, c.b, c.t, c.h, c.d)
					scale := float32(1 / math.Sqrt(float64(c.d)))
					run := func(d tensor.Device) (y, lse, dqkv []float32) {
						k := d.Kernels()
						yt, lt := tensor.MustZerosOn(d, c.b, c.t, c.h, c.d), tensor.MustZerosOn(d, c.b, c.h, c.t)
						q := qkv.MustTo(d)
						k.FlashAttention(yt, lt, q, c.b, c.t, c.h, c.d, scale, c.causal, c.bf16)
						dq := tensor.Full(tensor.Float32, math.NaN(), qkv.Shape()...).MustTo(d)
						k.FlashAttentionBackward(dq, dy.MustTo(d), q, yt, lt, c.b, c.t, c.h, c.d, scale, c.causal, c.bf16)
						return yt.MustTo(tensor.CPU()).F32(), lt.MustTo(tensor.CPU()).F32(), dq.MustTo(tensor.CPU()).F32()
					}
					wy, wl, wd := run(tensor.CPU())
					gy, gl, gd := run(dev)
					flashClose(t, f64s(wy), gy, 1e-4, c.bf16, "y")
					flashClose(t, f64s(wl), gl, 1e-4, c.bf16, "lse")
					flashClose(t, f64s(wd), gd, 1e-4, c.bf16, "dqkv")
				})
			}
		}
	}
}

func f64s(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// autograd.FlashSelfAttention on sim (the op keeps qkv, y and lse on the
// device and runs the table's entries both ways) against the same op on
// the host and against the unfused SelfAttention on the host: the output
// and qkv's gradient, accumulated into an existing Grad.
func TestFlashSelfAttentionOnSim(t *testing.T) {
	d := newDevice(t).Tensors()
	rng := tensor.NewRNG(43)
	qkv := tensor.Randn(rng, tensor.Float32, 2, 130, 3*2*24) // 2 heads of 24
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprintf("causal=%v", causal), func(t *testing.T) {
			o := autograd.AttentionOptions{Causal: causal}
			flash := func(xs []*autograd.Variable) *autograd.Variable { return autograd.FlashSelfAttention(xs[0], 2, o) }
			unfused := func(xs []*autograd.Variable) *autograd.Variable { return autograd.SelfAttention(xs[0], 2, o) }
			dy := tensor.Randn(rng, tensor.Float32, 2, 130, 2*24)
			gotY, gotG := onDevice(t, d, flash, dy, qkv)
			for name, f := range map[string]func([]*autograd.Variable) *autograd.Variable{"FlashSelfAttention": flash, "SelfAttention": unfused} {
				wantY, wantG := onDevice(t, tensor.CPU(), f, dy, qkv)
				flashClose(t, f64s(wantY.F32()), gotY.F32(), 1e-4, false, name+" on the host: output")
				flashClose(t, f64s(wantG[0].F32()), gotG[0].F32(), 1e-4, false, name+" on the host: qkv's gradient")
			}
		})
	}
}
