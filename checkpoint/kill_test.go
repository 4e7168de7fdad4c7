package checkpoint

import (
	"fmt"
	"github.com/goddp/goddp/internal/proctest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// TestCheckpointKillChild is the child process of TestSIGKILLDuringSave: it
// saves checkpoints in a loop until it is killed.
func TestCheckpointKillChild(t *testing.T) {
	if os.Getenv(proctest.WorkerEnv) != "kill" {
		t.Skip("child process of TestSIGKILLDuringSave")
	}
	dir := os.Getenv("GODDP_PROCTEST_DIR")
	m, err := NewManager(dir, Keep(2))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	w := make([]float32, 2<<20) // 8 MiB: a save takes long enough to be caught mid-write
	for step := 1; ; step++ {
		for i := range w {
			w[i] = float32(step)
		}
		c := &Checkpoint{Epoch: step / 10, Step: step, Model: map[string]*tensor.Tensor{"w": tensor.FromF32(w, len(w))}}
		if _, err := m.Save(c); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("saved", step)
	}
}

// TestSIGKILLDuringSave kills a process while it writes a checkpoint (a
// temporary file is present) and checks that the newest complete checkpoint
// still loads, and that its contents are those of its own step.
func TestSIGKILLDuringSave(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	midSave := 0
	const trials = 3
	for trial := range trials {
		world := proctest.Start(t, proctest.Options{Worker: "kill", World: 1, NoStore: true, KeepGoing: true,
			Timeout: time.Minute, Args: []string{"-test.run=^TestCheckpointKillChild$", "-test.count=1"}})
		dir, child := world.Dir, world.Procs[0]
		saved := 0
		require.Eventually(t, func() bool { // let a few saves complete
			saved = strings.Count(child.Stdout(), "saved ")
			return saved >= 2+trial || strings.Contains(child.Stdout(), "error")
		}, 30*time.Second, time.Millisecond, "child output:\n%s", child.Stdout())
		require.NotContains(t, child.Stdout(), "error")
		// Wait for a save in progress, then SIGKILL.
		deadline := time.Now().Add(5 * time.Second)
		caught := false
		for !caught && time.Now().Before(deadline) {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if isTemp(e.Name()) {
					if fi, err := e.Info(); err == nil && fi.Size() > 0 {
						caught = true
					}
				}
			}
		}
		require.NoError(t, child.Signal(syscall.SIGKILL))
		require.Equal(t, -int(syscall.SIGKILL), world.Wait()[0].Code)
		if caught {
			midSave++
		}

		m, err := NewManager(dir, Keep(2))
		require.NoError(t, err)
		f, err := m.Latest()
		require.NoError(t, err, "trial %d: no loadable checkpoint after SIGKILL", trial)
		assert.Empty(t, f.Skipped, "complete files are never corrupt")
		w := f.Checkpoint.Model["w"].F32()
		require.Len(t, w, 2<<20)
		for _, v := range []float32{w[0], w[len(w)/2], w[len(w)-1]} {
			require.Equal(t, float32(f.Checkpoint.Step), v, "contents belong to the step in the name")
		}
		assert.GreaterOrEqual(t, f.Checkpoint.Step, saved)
		t.Logf("trial %d: killed %s; latest valid %s", trial,
			map[bool]string{true: "mid-save", false: "between saves"}[caught], filepath.Base(f.Path))
	}
	assert.Positive(t, midSave, "no kill landed during a save")
}
