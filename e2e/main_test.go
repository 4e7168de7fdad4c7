package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
)

var (
	ddprunBin string // cmd/ddprun, built by TestMain
	linearBin string // examples/linear, built by TestMain
	tmpRoot   string // TMPDIR of every process started, removed at the end
)

// tally counts what the suite did, for the closing note of issue 8.
var tally struct {
	faults, hangs, ckptLost, jobs atomic.Int64
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "goddp-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	tmpRoot = filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmpRoot, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ddprunBin = filepath.Join(dir, "ddprun")
	linearBin = filepath.Join(dir, "linear")
	for bin, pkg := range map[string]string{ddprunBin: "../cmd/ddprun", linearBin: "../examples/linear"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: building %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	code := m.Run()
	if testing.Verbose() {
		fmt.Printf("e2e tally: jobs run %d, faults injected %d, hangs %d, checkpoints lost %d\n",
			tally.jobs.Load(), tally.faults.Load(), tally.hangs.Load(), tally.ckptLost.Load())
	}
	return code
}
