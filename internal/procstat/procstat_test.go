package procstat_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/internal/procstat"
)

func TestAlive(t *testing.T) {
	me := os.Getpid()
	start, state, ok := procstat.Stat(me)
	require.True(t, ok)
	require.NotZero(t, start)
	// The leader thread's state: running, or sleeping while another of
	// our threads reads the file.
	assert.Contains(t, "RS", string(state))
	assert.True(t, procstat.Alive(me, start))
	assert.True(t, procstat.Alive(me, 0), "an unknown start time compares equal")
	assert.False(t, procstat.Alive(me, start+1), "the same pid with another start time is a reused pid")

	// A child that has exited and been reaped is gone; while unreaped
	// (a zombie) it counts as dead already.
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	cstart := procstat.Start(pid)
	require.NotZero(t, cstart)
	assert.True(t, procstat.Alive(pid, cstart))
	require.NoError(t, cmd.Process.Kill())
	for {
		if _, st, ok := procstat.Stat(pid); !ok || st == 'Z' {
			break
		}
	}
	assert.False(t, procstat.Alive(pid, cstart), "a zombie")
	_ = cmd.Wait()
	assert.False(t, procstat.Alive(pid, cstart), "reaped")
}

func ExampleAlive() {
	// A file records its creator as (pid, start time); whoever finds it
	// later removes it only when that process is gone.
	pid := os.Getpid()
	start := procstat.Start(pid)
	fmt.Println(procstat.Alive(pid, start))
	// Output: true
}
