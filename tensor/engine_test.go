//go:build cgo && !noblas

package tensor

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// engineCase builds padded row-major operands for op(A) m×k, op(B) k×n and
// returns them with the float64 reference result of alpha*op(A)*op(B)+beta*C.
func engineCase(ta, tb bool, m, n, k int, alpha, beta float64) (a, b, c []float32, lda, ldb, ldc int, want []float64) {
	rowsA, colsA := stored(ta, m, k)
	rowsB, colsB := stored(tb, k, n)
	lda, ldb, ldc = colsA+3, colsB+5, n+1 // padding: slices must honour the strides
	a64, b64, c64 := seq64(rowsA*lda, 1), seq64(rowsB*ldb, 2), seq64(m*ldc, 3)
	want = append([]float64(nil), c64...)
	refGemm64(ta, tb, m, n, k, alpha, a64, lda, b64, ldb, beta, want, ldc)
	return to32(a64), to32(b64), to32(c64), lda, ldb, ldc, want
}

func TestEngineSlicesAndKernels(t *testing.T) {
	prev := engineThreads()
	defer engineSetThreads(prev)
	shapes := [][3]int{
		{130, 200, 70},  // split by n, oneDNN when op(B) is plain
		{200, 130, 90},  // split by m
		{64, 512, 784},  // the MLP's first layer
		{257, 255, 129}, // slices that do not fall on kernel tiles
		{512, 10, 64},   // thin: OpenBLAS
		{3, 700, 900},   // m smaller than any tile
	}
	for _, threads := range []int{1, 2, 3, 5} {
		SetThreads(threads)
		require.Equal(t, threads, Threads())
		for _, s := range shapes {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					m, n, k := s[0], s[1], s[2]
					name := fmt.Sprintf("threads=%d/%dx%dx%d/tA=%v,tB=%v/%s", threads, m, n, k, ta, tb, engineKernel(ta, tb, m, n, k))
					t.Run(name, func(t *testing.T) {
						a, b, c, lda, ldb, ldc, want := engineCase(ta, tb, m, n, k, 1.5, 0.5)
						Gemm(ta, tb, m, n, k, 1.5, a, lda, b, ldb, 0.5, c, ldc)
						for i := range want {
							if i%ldc == n { // the padding column must be left alone
								require.Equal(t, float32(want[i]), c[i], "padding element %d", i)
								continue
							}
							require.InDelta(t, want[i], float64(c[i]), 2e-5*float64(k)*(1+abs64(want[i])), "element %d", i)
						}
					})
				}
			}
		}
	}
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestEngineKernelChoice(t *testing.T) {
	if os.Getenv("OPENBLAS_CORETYPE") != "" {
		t.Skip("OPENBLAS_CORETYPE is set: the kernel choice depends on what it names")
	}
	if !strings.Contains(BLASName(), "onednn") {
		assert.Equal(t, "openblas", engineKernel(false, false, 256, 256, 256))
		return
	}
	assert.Equal(t, "onednn", engineKernel(false, false, 256, 256, 256))
	assert.Equal(t, "onednn", engineKernel(true, false, 512, 784, 64), "the MLP's weight gradient")
	assert.Equal(t, "onednn", engineKernel(false, true, 256, 256, 256), "op(B) transposed, m >= 128")
	if cpuinfoHas("GenuineIntel") {
		assert.Equal(t, "onednn", engineKernel(false, true, 64, 512, 512), "op(B) transposed, m = 64, Intel")
	} else {
		assert.Equal(t, "openblas", engineKernel(false, true, 64, 512, 512), "op(B) transposed, m = 64")
	}
	assert.Equal(t, "openblas", engineKernel(false, true, 128, 10, 512), "thin")
	assert.Equal(t, "openblas", engineKernel(false, false, 64, 512, 10), "k below a tile")
	assert.Equal(t, "openblas", engineKernel(false, false, 64, 64, 64), "small product")
}

// cpuinfoHas reports whether /proc/cpuinfo's first CPU lists every word
// (flags such as "avx2", or the vendor "GenuineIntel").
func cpuinfoHas(words ...string) bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n\n")
	have := map[string]bool{}
	for _, w := range strings.Fields(first) {
		have[w] = true
	}
	for _, w := range words {
		if !have[w] {
			return false
		}
	}
	return true
}

// TestBLASCore checks that OpenBLAS runs kernels for this CPU's vector
// width: OpenBLAS 0.3.21 falls back to "Prescott" on CPUs it does not know,
// and the engine must then re-initialise it (blas_core_fix in engine.c).
func TestBLASCore(t *testing.T) {
	core := BLASCore()
	t.Logf("BLASCore: %s", core)
	if os.Getenv("OPENBLAS_CORETYPE") != "" {
		t.Skip("OPENBLAS_CORETYPE is set: OpenBLAS runs what it names")
	}
	name, _, _ := strings.Cut(core, " ")
	switch {
	case cpuinfoHas("avx512f", "avx512bw", "avx512dq", "avx512vl"):
		assert.Contains(t, []string{"SkylakeX", "Cooperlake", "SapphireRapids", "Zen"}, name)
	case cpuinfoHas("avx2", "fma"):
		assert.Contains(t, []string{"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake", "SapphireRapids"}, name)
	default:
		t.Skip("no AVX2 on this CPU")
	}
	assert.NotContains(t, core, "pre-AVX2")
}

// TestBLASCoreForcedSlow runs this test binary with OPENBLAS_CORETYPE=Prescott
// on an AVX2 CPU: the engine must leave the user's choice alone, report the
// slow kernels and send every float32 product to oneDNN.
func TestBLASCoreForcedSlow(t *testing.T) {
	if os.Getenv("GODDP_TEST_FORCED_SLOW") == "1" {
		fmt.Printf("core=%s\nkernel64=%s\n", BLASCore(), engineKernel(false, false, 64, 64, 64))
		return
	}
	if !cpuinfoHas("avx2", "fma") {
		t.Skip("no AVX2 on this CPU")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBLASCoreForcedSlow$", "-test.v")
	cmd.Env = append(os.Environ(), "GODDP_TEST_FORCED_SLOW=1", "OPENBLAS_CORETYPE=Prescott")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "core=Prescott (pre-AVX2 kernels")
	if strings.Contains(BLASName(), "onednn") {
		assert.Contains(t, string(out), "kernel64=onednn")
	} else {
		assert.Contains(t, string(out), "kernel64=openblas")
	}
}

// TestBLASCoreNarrowKernels runs this test binary with
// OPENBLAS_CORETYPE=Haswell (OpenBLAS's AVX2 kernels): on a CPU with
// full-width AVX-512 (AMD family 1Ah and later) the engine must say so and
// send even a 64³ product to oneDNN; elsewhere the shape rule keeps that
// product on OpenBLAS.
func TestBLASCoreNarrowKernels(t *testing.T) {
	if os.Getenv("GODDP_TEST_FORCED_SLOW") == "1" {
		t.Skip("the child of TestBLASCoreForcedSlow")
	}
	if os.Getenv("GODDP_TEST_NARROW") == "1" {
		fmt.Printf("core=%s\nkernel64=%s\n", BLASCore(), engineKernel(false, false, 64, 64, 64))
		return
	}
	if !cpuinfoHas("avx2", "fma") || !strings.Contains(BLASName(), "onednn") {
		t.Skip("no AVX2 on this CPU, or no oneDNN in this build")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBLASCoreNarrowKernels$", "-test.v")
	cmd.Env = append(os.Environ(), "GODDP_TEST_NARROW=1", "OPENBLAS_CORETYPE=Haswell")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("%s", out)
	if cpuinfoHas("AuthenticAMD", "avx512f", "avx512bw", "avx512dq", "avx512vl") && cpuFamily() >= 0x1a {
		assert.Contains(t, string(out), "core=Haswell (AVX2 kernels on a full-width AVX-512 CPU")
		assert.Contains(t, string(out), "kernel64=onednn")
	} else {
		assert.Contains(t, string(out), "kernel64=openblas")
	}
}

// cpuFamily is /proc/cpuinfo's "cpu family" of the first CPU (0 when absent).
func cpuFamily() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "cpu family" {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// TestEngineConcurrentCallers runs GEMMs from several goroutines at once: one
// of them holds the pool's helpers, the others run on their own threads.
func TestEngineConcurrentCallers(t *testing.T) {
	prev := engineThreads()
	defer engineSetThreads(prev)
	engineSetThreads(2)
	const callers, rounds = 4, 20
	m, n, k := 96, 160, 128
	var wg sync.WaitGroup
	errs := make(chan string, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b, c0, lda, ldb, ldc, want := engineCase(g%2 == 1, false, m, n, k, 1, 0.25)
			for r := range rounds {
				c := append([]float32(nil), c0...)
				Gemm(g%2 == 1, false, m, n, k, 1, a, lda, b, ldb, 0.25, c, ldc)
				for i := range want {
					if d := want[i] - float64(c[i]); d > 1e-2 || d < -1e-2 {
						errs <- fmt.Sprintf("caller %d round %d element %d: %v, want %v", g, r, i, c[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
