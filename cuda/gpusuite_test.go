//go:build !cuda

package cuda_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/goddp/goddp/cuda"
)

// TestGPUSuite runs this package's -tags cuda tests in a child `go test`
// when NVML finds a GPU, so that `go test ./cuda` on a GPU machine with Go
// covers the device code. (The cuda build also runs, and skips saying why,
// without a GPU; scripts/gpu-kit.sh ships its test binary.)
func TestGPUSuite(t *testing.T) {
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Skipf("no GPU, so the -tags cuda device tests would only skip: %v", err)
	}
	if testing.Short() {
		t.Skip("builds and runs the cuda tests")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	t.Logf("%d GPU(s): running go test -tags cuda", n)
	cmd := exec.Command(goBin, "test", "-tags", "cuda", "-count=1", "-v", ".")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("go test -tags cuda: %v", err)
	}
}
