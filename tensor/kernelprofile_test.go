package tensor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A profile records exactly the kernel calls made while it is started, by
// kernel and shape, with their work; a second recorder is refused.
func TestKernelProfileRecordsWhileStarted(t *testing.T) {
	rng := NewRNG(2)
	a, b := Rand(rng, Float32, 64*16).F32(), Rand(rng, Float32, 32*16).F32()
	c := make([]float32, 64*32)
	product := func() { Gemm(false, true, 64, 32, 16, 1, a, 16, b, 16, 0, c, 32) }
	a64, b64, c64 := make([]float64, 8*4), make([]float64, 8*5), make([]float64, 4*5)

	p := NewKernelProfile()
	product() // before Start: not recorded
	stop, err := p.Start()
	require.NoError(t, err)
	_, err = NewKernelProfile().Start()
	require.ErrorIs(t, err, ErrProfiling)
	product()
	product()
	Gemm64(true, false, 4, 5, 8, 1, a64, 4, b64, 5, 0, c64, 5)
	s := Conv2dShape{N: 2, C: 3, H: 6, W: 6, O: 4, KH: 3, KW: 3, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1,
		Groups: 1, OH: 4, OW: 4}
	x, w := Rand(rng, Float32, 2*3*6*6).F32(), Rand(rng, Float32, 4*3*3*3).F32()
	convRan := Conv2dForward(&s, make([]float32, 2*4*4*4), x, w, nil)
	stop()
	stop()    // idempotent
	product() // after stop: not recorded

	byKernel := map[string]KernelStat{}
	for _, st := range p.Stats() {
		byKernel[st.Kernel] = st
	}
	sg := byKernel["sgemm"]
	require.Equal(t, "64x32x16 NT", sg.Shape)
	require.EqualValues(t, 2, sg.Calls)
	require.Equal(t, 2*2*64*32*16.0, sg.FLOPs)
	require.Positive(t, sg.Time)
	require.Positive(t, sg.GFLOPS())
	dg := byKernel["dgemm"]
	require.Equal(t, "4x5x8 TN", dg.Shape)
	require.EqualValues(t, 1, dg.Calls)
	want := 2
	if convRan { // builds without oneDNN have no convolution kernel to record
		cv := byKernel["conv_fwd"]
		require.EqualValues(t, 1, cv.Calls)
		require.Equal(t, 2*2*4*16*27.0, cv.FLOPs, "N·O·OH·OW multiply-adds of C·KH·KW each")
		require.True(t, strings.HasPrefix(cv.Shape, "N2 C3 6x6 -> O4 4x4 k3x3"), cv.Shape)
		want = 3
	}
	require.Len(t, byKernel, want)
	tot := p.Total()
	require.EqualValues(t, want+1, tot.Calls)
	require.Equal(t, sg.FLOPs+dg.FLOPs+byKernel["conv_fwd"].FLOPs, tot.FLOPs)

	// The slot is free again, and a restarted profile adds to its figures.
	stop, err = p.Start()
	require.NoError(t, err)
	product()
	stop()
	require.EqualValues(t, 3, p.Stats()[indexOf(p.Stats(), "sgemm")].Calls)
}

func indexOf(st []KernelStat, kernel string) int {
	for i, s := range st {
		if s.Kernel == kernel {
			return i
		}
	}
	return -1
}

func ExampleKernelProfile() {
	p := NewKernelProfile()
	stop, err := p.Start()
	if err != nil {
		panic(err)
	}
	a, b, c := make([]float32, 128*128), make([]float32, 128*128), make([]float32, 128*128)
	for range 3 {
		Gemm(false, false, 128, 128, 128, 1, a, 128, b, 128, 0, c, 128)
	}
	stop()
	for _, s := range p.Stats() {
		fmt.Printf("%s %s: %d calls, %.0f MFLOP\n", s.Kernel, s.Shape, s.Calls, s.FLOPs/1e6)
	}
	// Output: sgemm 128x128x128 NN: 3 calls, 13 MFLOP
}

// The fused attention's AVX-512 kernel is recorded one head at a time,
// with the work of its products over the visible (query, key) pairs: the
// forward's two, the backward's five.
func TestKernelProfileRecordsFusedAttention(t *testing.T) {
	const b, tt, h, d = 1, 40, 2, 16
	if !flashFusedOK(d) {
		t.Skip("no fused attention kernel on this CPU or build")
	}
	rng := NewRNG(3)
	qkv := Rand(rng, Float32, b, tt, 3*h*d)
	p := NewKernelProfile()
	stop, err := p.Start()
	require.NoError(t, err)
	y, lse := FlashAttention(qkv, b, tt, h, d, 0.25, true, false)
	FlashAttentionBackward(Rand(rng, Float32, b, tt, h*d), qkv, y, lse, b, tt, h, d, 0.25, true, false)
	stop()
	byKernel := map[string]KernelStat{}
	for _, st := range p.Stats() {
		byKernel[st.Kernel] = st
	}
	pairs := float64(tt * (tt + 1) / 2)
	fwd, bwd := byKernel["flash_fwd"], byKernel["flash_bwd"]
	require.Equal(t, "head T40 D16 causal", fwd.Shape)
	require.EqualValues(t, b*h, fwd.Calls)
	require.Equal(t, float64(b*h)*2*2*d*pairs, fwd.FLOPs)
	require.EqualValues(t, b*h, bwd.Calls)
	require.Equal(t, float64(b*h)*5*2*d*pairs, bwd.FLOPs)
	require.Len(t, byKernel, 2, "the fused path makes no Gemm calls of its own: %v", byKernel)
}
