//go:build cuda

package cuda

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// fakeBF16 is the fake GPU with cuBLAS's bf16 GEMM (cuBLAS 11 and later).
type fakeBF16 struct{ *fakeDevice }

func (f fakeBF16) hasGemmBF16() bool { return true }

func (f fakeBF16) gemmBF16(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, b uint64, ldb int, beta float32, c uint64, ldc int) error {
	f.note("gemmbf16 %v %v %d %d %d lda=%d ldb=%d ldc=%d", ta, tb, m, n, k, lda, ldb, ldc)
	return nil
}

// A bf16 product on a GPU narrows both operands with f32_to_bf16 and calls
// cuBLAS's bf16 GEMM once, mapped onto column-major as Sgemm is (operands
// and transposes swapped, row strides kept); on a device without it (the
// plain fake: cuBLAS before 11) the narrowed operands are widened back and
// go through Sgemm. (The numbers are checked on goddp/cuda/sim, which takes
// the widening route, and by TestGPUGemmBF16 on a GPU.)
func TestTensorsGemmBF16Calls(t *testing.T) {
	f := &fakeDevice{next: 1 << 40, live: map[uint64]int64{}, t: t}
	for _, withBF16 := range []bool{true, false} {
		t.Run(fmt.Sprintf("cublasGemmEx=%v", withBF16), func(t *testing.T) {
			c := &Context{ordinal: 0, dev: f}
			if withBF16 {
				c.dev = fakeBF16{f}
			}
			f.calls, f.launches, f.gemms = nil, nil, 0
			dev := c.Tensors()
			// C [9×4] = Aᵀ·B for A [5×9] and B [5×4], row-major.
			a, err := tensor.Zeros(tensor.Float32, 5, 9).To(dev)
			require.NoError(t, err)
			b, err := tensor.Zeros(tensor.Float32, 5, 4).To(dev)
			require.NoError(t, err)
			cc, err := tensor.Zeros(tensor.Float32, 9, 4).To(dev)
			require.NoError(t, err)
			f.calls, f.launches = nil, nil
			dev.Kernels().GemmBF16(true, false, 9, 4, 5, 1, a, 9, b, 4, 0, cc, 4)
			require.NoError(t, dev.Synchronize())
			var kernels []string
			for _, l := range f.launches {
				kernels = append(kernels, l.kernel)
			}
			narrow := slices.DeleteFunc(slices.Clone(kernels), func(k string) bool { return k != "f32_to_bf16" })
			require.Len(t, narrow, 2, "both operands narrowed: %v", kernels)
			if withBF16 {
				require.Equal(t, 1, f.count("gemmbf16"), "%v", f.calls)
				require.True(t, slices.Contains(f.calls, "gemmbf16 false true 4 9 5 lda=4 ldb=9 ldc=4"), "%v", f.calls)
				require.Zero(t, f.gemms, "no float32 GEMM")
				require.NotContains(t, kernels, "bf16_to_f32")
				return
			}
			require.Zero(t, f.count("gemmbf16"))
			require.Equal(t, 1, f.gemms)
			require.True(t, slices.Contains(f.calls, "sgemm 4 9 5"), "%v", f.calls)
			require.Len(t, slices.DeleteFunc(slices.Clone(kernels), func(k string) bool { return k != "bf16_to_f32" }), 2,
				"both operands widened back: %v", kernels)
		})
	}
}
