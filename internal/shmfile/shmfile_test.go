package shmfile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/internal/procstat"
)

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// The sweep removes a file only when nobody holds its lock and no process
// runs with the pid and start time of its name; everything else stays.
func TestSweepKeepsLiveFiles(t *testing.T) {
	dir, err := os.MkdirTemp(Dir, "goddp-sweeptest-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	me := os.Getpid()
	start := procstat.Start(me)
	require.NotZero(t, start)
	dead := deadPid(t)

	mk := func(name string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	// Unlocked, creator gone: removed.
	mk(fmt.Sprintf("goddp-shm-%d-%d-00112233aabbccdd", dead, start))
	mk(fmt.Sprintf("goddp-shm-%d-%d-00112233aabbccde-arena", dead, start))
	mk(fmt.Sprintf("goddp-shm-%d-00112233aabbccdf", dead)) // an older goddp's name
	// Unlocked, pid alive but another process (the pid was recycled): removed.
	mk(fmt.Sprintf("goddp-shm-%d-%d-00112233aabbcce0", me, start+1))
	// Unlocked, creator alive (between create and lock, or an older goddp): kept.
	mk(fmt.Sprintf("goddp-shm-%d-%d-00112233aabbcce1", me, start))
	mk(fmt.Sprintf("goddp-shm-%d-00112233aabbcce2-arena", me))
	// Not ours: kept.
	mk("goddp-shm-notapid-00112233aabbcce3")
	mk(fmt.Sprintf("goddp-shm-%d-nothex", dead))
	mk("other-file")
	require.NoError(t, os.Symlink(filepath.Join(dir, "other-file"), filepath.Join(dir, fmt.Sprintf("goddp-shm-%d-00112233aabbcce4", dead))))
	// Locked by a live creator whose pid means nothing here (another pid
	// namespace): kept, whatever the name says.
	locked := filepath.Join(dir, fmt.Sprintf("goddp-shm-%d-%d-00112233aabbcce5", dead, start))
	fd, err := Create(locked, 8192)
	require.NoError(t, err)
	defer syscall.Close(fd)

	removed, err := Sweep(dir)
	require.NoError(t, err)
	for i := range removed {
		removed[i] = filepath.Base(removed[i])
	}
	assert.ElementsMatch(t, []string{
		fmt.Sprintf("goddp-shm-%d-%d-00112233aabbccdd", dead, start),
		fmt.Sprintf("goddp-shm-%d-%d-00112233aabbccde-arena", dead, start),
		fmt.Sprintf("goddp-shm-%d-00112233aabbccdf", dead),
		fmt.Sprintf("goddp-shm-%d-%d-00112233aabbcce0", me, start+1),
	}, removed)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, left, 7, "%v", left)

	// Once its creator lets go (it died), the locked one goes too.
	syscall.Close(fd)
	removed, err = Sweep(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{locked}, removed)
	st, err := os.Stat(filepath.Join(dir, "other-file"))
	require.NoError(t, err, "the symlink's target")
	assert.EqualValues(t, 1, st.Size())

	_, err = Sweep(filepath.Join(dir, "missing"))
	assert.NoError(t, err)
}
