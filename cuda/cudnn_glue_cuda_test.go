//go:build cuda

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cudnnGlue builds driver_dl.c's cuDNN glue into testdata/cudnn/harness.c
// with a stand-in libcudnn (fake_cudnn.c, which prints every call) and
// runs it for one shape; it returns the harness's output.
func cudnnGlue(t *testing.T, prec string, dims ...string) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the stand-in cuDNN: %v", cc, err)
	}
	dir := t.TempDir()
	lib, bin := filepath.Join(dir, "libfakecudnn.so"), filepath.Join(dir, "harness")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", lib, "testdata/cudnn/fake_cudnn.c"},
		{"-I", ".", "-o", bin, "testdata/cudnn/harness.c", "-ldl"},
	} {
		out, err := exec.Command(cc, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", cc, args, out)
	}
	out, err := exec.Command(bin, append([]string{lib, prec}, dims...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// The descriptors carry the op's shape (the filter's channels per group,
// symmetric padding from the top/left); without TF32 the math is FMA and
// the first heuristic that runs without tensor-op math within the
// workspace bound is chosen; each pass gets its operands in cuDNN's order
// and its workspace.
func TestCUDNNGlue(t *testing.T) {
	// N C H W O KH KW padH padW strideH strideW dilH dilW groups OH OW
	dims := strings.Fields("2 4 9 7 6 3 2 1 2 2 1 1 2 2 5 9")
	out := cudnnGlue(t, "0", dims...)
	for _, want := range []string{
		"version 91900\n",
		"stream 0x5eed\n",
		"tensor format 0 dtype 0 2 4 9 7\n",
		"filter dtype 0 format 0 6 2 3 2\n",
		"conv pad 1 2 stride 2 1 dilation 1 2 mode 1 compute 0\n",
		"groups 2\n",
		"math 3\n",
		"tensor format 0 dtype 0 2 6 5 9\n",
		"plan 0\n",
		// algorithm 1 is TF32, 2 wants a gigabyte, 3 cannot run
		"pass 0 status 0 algo 4 ws 400\n", "pass 1 status 0 algo 4 ws 400\n", "pass 2 status 0 algo 4 ws 400\n",
		"forward x=0x200 w=0x300 algo 4 ws 0x400 400 alpha 1 beta 0 y=0x100\n",
		"data w=0x300 y=0x200 algo 4 ws 0x400 400 alpha 1 beta 0 x=0x100\n",
		"filter x=0x200 y=0x300 algo 4 ws 0x400 400 alpha 1 beta 1 w=0x100\n",
		"destroy 0\n",
	} {
		assert.Contains(t, out, want)
	}
	assert.Equal(t, 3, strings.Count(out, "run 0\n"), "every pass ran")
	assert.Equal(t, 4, strings.Count(out, "math 3\n"), "FMA math for the plan and before each pass")
	assert.NotContains(t, out, "find ", "the heuristics chose")

	// TF32 allowed: cuDNN's default math, and the TF32 algorithm, run with
	// its tensor-op math.
	out = cudnnGlue(t, "1", dims...)
	assert.Contains(t, out, "math 0\n")
	assert.Contains(t, out, "pass 0 status 0 algo 1 ws 100\n")
	assert.Equal(t, 3, strings.Count(out, "math 1\n"), "each pass with its algorithm's math")

	// Timed (SetCUDNNBenchmark), float32 without TF32: cudnnFind*'s order,
	// its fastest tensor-op algorithm passed over, the next run with FMA.
	out = cudnnGlue(t, "2", dims...)
	for _, pass := range []string{"forward", "data", "filter"} {
		assert.Contains(t, out, "find "+pass+"\n")
	}
	assert.Contains(t, out, "pass 2 status 0 algo 4 ws 400\n")
	assert.Equal(t, 4, strings.Count(out, "math 3\n"))

	// Timed with TF32: cudnnFind*'s fastest, a tensor-op algorithm; and
	// when cudnnFind* fails (its own scratch not allocated), the
	// heuristics' choice instead of no plan.
	out = cudnnGlue(t, "3", dims...)
	assert.Contains(t, out, "pass 1 status 0 algo 5 ws 500\n")
	t.Setenv("FAKE_FIND_FAIL", "1")
	out = cudnnGlue(t, "3", dims...)
	assert.Contains(t, out, "find data\n")
	assert.Contains(t, out, "pass 1 status 0 algo 1 ws 100\n")
	assert.Equal(t, 3, strings.Count(out, "run 0\n"), "every pass ran")

	// Uneven padding: cuDNN's output (OH 5) is not the op's (6), so no plan.
	dims[14] = "6"
	out = cudnnGlue(t, "0", dims...)
	assert.Contains(t, out, "plan -2\n")
}

// A cuDNN opened by path (a Python wheel's, not on LD_LIBRARY_PATH) gets
// its sub-libraries loaded from its directory before first use, in
// whatever order their needs allow: here libcudnn_cnn.so.9 needs
// libcudnn_ops.so.9, which sorts after it.
func TestCUDNNPreloadsSiblings(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s): %v", cc, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "x.c")
	require.NoError(t, os.WriteFile(src, []byte("int goddp_fake_sym(void) { return 1; }\n"), 0o644))
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-Wl,-soname,libcudnn_ops.so.9", "-o", filepath.Join(dir, "libcudnn_ops.so.9"), src},
		{"-shared", "-fPIC", "-Wl,-soname,libcudnn_cnn.so.9", "-o", filepath.Join(dir, "libcudnn_cnn.so.9"), src,
			"-L" + dir, "-l:libcudnn_ops.so.9"},
		{"-shared", "-fPIC", "-o", filepath.Join(dir, "libcudnn_other.so.8"), src},
	} {
		out, err := exec.Command(cc, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", cc, args, out)
	}
	preloadSiblings(filepath.Join(dir, "libcudnn.so.9"))
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	assert.Contains(t, string(maps), filepath.Join(dir, "libcudnn_ops.so.9"))
	assert.Contains(t, string(maps), filepath.Join(dir, "libcudnn_cnn.so.9"))
	assert.NotContains(t, string(maps), filepath.Join(dir, "libcudnn_other.so.8"), "another major version's")
}
