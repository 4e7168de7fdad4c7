package scale

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds ddprun, mlp, hierprobe and elastic, built once by TestMain.
var binDir string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "goddp-scale-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = filepath.Join(dir, "bin")
	for name, pkg := range map[string]string{"ddprun": "../../cmd/ddprun", "mlp": "../../examples/mlp", "hierprobe": "./testdata/hierprobe", "elastic": "./testdata/elastic"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "scale: building %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}
