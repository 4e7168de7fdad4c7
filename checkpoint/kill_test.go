package checkpoint

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"goddp/tensor"
)

const killDirEnv = "GODDP_CKPT_KILL_DIR"

// TestCheckpointKillChild is the child process of TestSIGKILLDuringSave: it
// saves checkpoints in a loop until it is killed.
func TestCheckpointKillChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("child process of TestSIGKILLDuringSave")
	}
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
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		saved := 0
		for saved < 2+trial && lines.Scan() { // let a few saves complete
			require.True(t, strings.HasPrefix(lines.Text(), "saved"), lines.Text())
			saved++
		}
		require.Equal(t, 2+trial, saved, "child stopped early")
		go func() { // keep draining so the child never blocks on stdout
			for lines.Scan() {
			}
		}()
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
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
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
