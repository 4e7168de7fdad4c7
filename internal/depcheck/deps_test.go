package depcheck

import (
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const mod = "github.com/goddp/goddp/"

// deps lists the packages pkgs link (go list -deps, no tests), each with
// whether it is in the standard library.
func deps(t *testing.T, pkgs ...string) map[string]bool {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}"}
	for _, p := range pkgs {
		args = append(args, mod+p)
	}
	out, err := exec.Command(goTool, args...).CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	m := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		m[path] = std == "true"
	}
	return m
}

func TestDependencyBars(t *testing.T) {
	t.Run("tensor links no gorgonia", func(t *testing.T) {
		for p := range deps(t, "tensor") {
			require.False(t, strings.HasPrefix(p, "gorgonia.org/"), "tensor links %s (the bridge is tensor/gorgoniatensor)", p)
		}
	})
	t.Run("libraries link no comm driver", func(t *testing.T) {
		d := deps(t, "nn", "ddp", "checkpoint", "amp", "metrics", "optim/zero", "cuda/sim")
		for _, drv := range []string{"comm", "comm/tcp", "comm/shm", "comm/mpi", "comm/nccl", "comm/hier"} {
			_, linked := d[mod+drv]
			require.False(t, linked, "%s is linked: import comm/backend, the contract, instead", drv)
		}
	})
	t.Run("ddprun links no shm driver", func(t *testing.T) {
		_, linked := deps(t, "cmd/ddprun")[mod+"comm/shm"]
		require.False(t, linked, "comm/shm is linked: the /dev/shm sweep is internal/shmfile")
	})
	t.Run("examples/linear is small", func(t *testing.T) {
		var ext []string
		for p, std := range deps(t, "examples/linear") {
			if !std {
				ext = append(ext, p)
			}
		}
		sort.Strings(ext)
		// 172 at 10fefe9 (2026-11-29), before issue 44's item 3 took gorgonia
		// out of tensor and gonum/plot out of trainer.
		require.LessOrEqual(t, len(ext), 60, "non-stdlib packages: %v", ext)
	})
}
