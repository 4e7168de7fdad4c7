package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds ddprun and mlp, built once by TestMain. It goes first on the
// PATH of every job, so the commands the tests run are the ones
// docs/launcher.md shows (`srun ... mlp -epochs 2`, `ddprun ... mlp`).
var binDir string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "goddp-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The daemons and the tasks run as root but the directory must be
	// searchable by everyone, as a shared file system's would be.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = filepath.Join(dir, "bin")
	for name, pkg := range map[string]string{"ddprun": "../../cmd/ddprun", "mlp": "../../examples/mlp"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "cluster: building %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}
