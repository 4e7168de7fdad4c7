package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vector kernels (binary_kernels.c) must give the Go loops' bits for
// every length, offset and aliasing that binary ops and AddInto produce.

var kernelSizes = []int{0, 1, 7, 33, 511, 512, 513, 4099, 1000003}

// kernelValues fills n elements with a mix of ordinary numbers, signed
// zeros, infinities, subnormals and (in one operand only) a NaN.
func kernelValues[T float](rng *rand.Rand, n int, special bool) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T((rng.Float64()*2 - 1) * math.Pow(2, float64(rng.IntN(40)-20)))
		if v[i] == 0 {
			v[i] = 1
		}
	}
	if special && n > 0 {
		specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), 1e-40, -1e-310, math.NaN()}
		for k, s := range specials {
			v[(k*7919)%n] = T(s)
		}
	}
	return v
}

func sameBitsK[T float](t *testing.T, want, got []T, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.Float64bits(w) != math.Float64bits(g) && !(w != w && g != g) {
			t.Fatalf("%s: element %d = %v, want %v (Go loop)", what, i, got[i], want[i])
		}
	}
}

func testKernelsBitIdentical[T float](t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []binOp{opAdd, opSub, opMul, opDiv}
	for _, n := range kernelSizes {
		for _, off := range []int{0, 1, 3} {
			xb := kernelValues[T](rng, n+off, true)
			yb := kernelValues[T](rng, n+off, false)
			x, y := xb[off:], yb[off:] // unaligned starts
			s := T(rng.Float64() + 0.5)
			for _, op := range ops {
				name := binOpNames[op]
				want, got := make([]T, n+off)[off:], make([]T, n+off)[off:]
				binVVGo(op, want, x, y)
				binVV(op, got, x, y)
				sameBitsK(t, want, got, name+" vv")

				binVSGo(op, want, x, s)
				binVS(op, got, x, s)
				sameBitsK(t, want, got, name+" vs")

				binSVGo(op, want, s, y)
				binSV(op, got, s, y)
				sameBitsK(t, want, got, name+" sv")

				// In place: dst == x, dst == y.
				binVVGo(op, want, x, y)
				copy(got, x)
				binVV(op, got, got, y)
				sameBitsK(t, want, got, name+" vv dst==x")
				binVVGo(op, want, x, y)
				copy(got, y)
				binVV(op, got, x, got)
				sameBitsK(t, want, got, name+" vv dst==y")
				binVSGo(op, want, x, s)
				copy(got, x)
				binVS(op, got, got, s)
				sameBitsK(t, want, got, name+" vs dst==x")
				binSVGo(op, want, s, y)
				copy(got, y)
				binSV(op, got, s, got)
				sameBitsK(t, want, got, name+" sv dst==y")
			}
		}
	}
}

func TestBinaryKernelsBitIdentical(t *testing.T) {
	t.Run("float32", testKernelsBitIdentical[float32])
	t.Run("float64", testKernelsBitIdentical[float64])
}

// A partial overlap is refused by the C kernels and runs the Go loop, whose
// element-by-element order defines the result.
func TestBinaryKernelsPartialOverlap(t *testing.T) {
	const n = 2000
	rng := rand.New(rand.NewPCG(3, 4))
	base := kernelValues[float32](rng, n+5, false)
	want := append([]float32(nil), base...)
	got := append([]float32(nil), base...)
	binVVGo(opAdd, want[5:], want[:n], want[2:n+2])
	binVV(opAdd, got[5:], got[:n], got[2:n+2])
	sameBitsK(t, want, got, "vv overlap")
	if binCMin < 1<<62 {
		require.False(t, binVVC(opAdd, got[5:], got[:n], got[2:n+2]), "C kernel must refuse a partial overlap")
		require.False(t, binVSC(opMul, got[1:n+1], got[:n], 2), "C kernel must refuse a partial overlap")
	}
}

// With cgo the kernels run for long slices (the fast path is not dead code).
func TestBinaryKernelsTaken(t *testing.T) {
	if binCMin >= 1<<62 {
		t.Skip("built without cgo: Go loops only")
	}
	d, x, y := make([]float64, 600), make([]float64, 600), make([]float64, 600)
	require.True(t, binVVC(opDiv, d, x, y))
	require.True(t, binVVC(opSub, x, x, y))
	require.True(t, binVSC(opMul, y, y, 3))
	require.True(t, binSVC(opSub, d, 3, y))
	require.False(t, binVVC(opAdd, d, d, d), "dst == x == y goes to the Go loop")
}

// Public ops on strided views with unaligned offsets: Add/Sub/Mul/Div of
// Narrow views, a scalar broadcast and a row broadcast, each element
// checked against binScalar.
func TestBinaryOpsOnViewsMatchScalar(t *testing.T) {
	rng := NewRNG(7)
	for _, dt := range []DType{Float32, Float64} {
		for _, n := range []int{1, 7, 33, 1000003} {
			a := Narrow(Rand(rng, dt, n+3), 0, 3, n)
			b := Narrow(Rand(rng, dt, n+1), 0, 1, n)
			s := Narrow(Rand(rng, dt, 2), 0, 1, 1)
			for op := opAdd; op <= opDiv; op++ {
				for _, c := range []struct {
					name string
					x, y *Tensor
				}{{"vv", a, b}, {"vs", a, s}, {"sv", s, b}, {"sv0", Expand(scalarView(s), n), b}} {
					out := binary(op, c.x, c.y)
					require.Equal(t, []int{n}, out.Shape())
					for i := 0; i < n; i += 1 + i/3 {
						xi, yi := c.x.At(min(i, c.x.Size(0)-1)), c.y.At(min(i, c.y.Size(0)-1))
						var want float64
						if dt == Float32 {
							want = float64(binScalar(op, float32(xi), float32(yi)))
						} else {
							want = binScalar(op, xi, yi)
						}
						if got := out.At(i); math.Float64bits(got) != math.Float64bits(want) {
							t.Fatalf("%v %s %s n=%d [%d] = %v, want %v", dt, binOpNames[op], c.name, n, i, got, want)
						}
					}
				}
			}
		}
	}
}

// scalarView views a one-element tensor as 0-d.
func scalarView(t *Tensor) *Tensor { return t.Reshape() }

// Expanded (stride 0) operands on both sides give a fill of one product.
func TestBinaryBothBroadcast(t *testing.T) {
	x := Expand(FromF32([]float32{3}, 1, 1), 4, 5)
	y := Expand(FromF32([]float32{-0.5}), 4, 5)
	out := Mul(x, y)
	require.True(t, out.IsContiguous())
	for _, v := range out.F32() {
		require.Equal(t, float32(-1.5), v)
	}
}

func TestAxpyAndContiguousOfConstant(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	for _, n := range []int{0, 1, 7, 1000003} {
		c := Expand(FromF32([]float32{negZero}), n)
		cc := c.Contiguous()
		for _, v := range cc.F32() {
			require.True(t, math.Signbit(float64(v)), "Contiguous of an expanded -0 keeps the sign")
		}
		dst := Rand(NewRNG(1), Float32, n)
		want := append([]float32(nil), dst.F32()...)
		v := float32(0.3)
		for i := range want {
			want[i] += v
		}
		AddInto(dst, Expand(FromF32([]float32{v}), n))
		sameBitsK(t, want, dst.F32(), "AddInto of an expanded scalar")
		dst2 := Rand(NewRNG(1), Float32, n)
		for i := range want {
			want[i] = dst2.F32()[i] + 2*v
		}
		Axpy(dst2, 2, Expand(FromF32([]float32{v}, 1), n))
		sameBitsK(t, want, dst2.F32(), "Axpy(2) of an expanded scalar")
	}
	// An empty broadcast is not constant (no element to read).
	require.False(t, Expand(New(Float32, 0), 0).isConstant())
}

// BenchmarkBinaryKernels compares the Go loop with the dispatching binVV
// (vector kernels from binCMin up) for an in-place add, d += s, as
// AddInto runs it; binCMin is where "vec" should start to win.
//
//	go test -run '^$' -bench BinaryKernels ./tensor/
func BenchmarkBinaryKernels(b *testing.B) {
	for _, n := range []int{128, 256, 512, 1024, 4096, 1 << 20} {
		d, s := make([]float32, n), make([]float32, n)
		b.Run(fmt.Sprintf("go/%d", n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for range b.N {
				binVVGo(opAdd, d, d, s)
			}
		})
		b.Run(fmt.Sprintf("vec/%d", n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for range b.N {
				if !binVVC(opAdd, d, d, s) {
					binVVGo(opAdd, d, d, s)
				}
			}
		})
	}
}
