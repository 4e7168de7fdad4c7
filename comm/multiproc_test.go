package comm

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMultiProcess runs the whole collective table in real processes that
// meet through Init(env://), with rank 0 hosting the authenticated store.
func TestMultiProcess(t *testing.T) {
	for _, world := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			ws := spawnWorld(t, "cases", world, "GODDP_TCP_PIECE_BYTES=16384")
			codes := waitAll(t, ws, 90*time.Second)
			for r, c := range codes {
				assert.Equal(t, 0, c, "rank %d stderr:\n%s", r, ws[r].stderr.String())
			}
		})
	}
}

// TestPeerKilled kills one rank with SIGKILL while the others are inside
// all-reduces: the survivors must fail promptly (not at the 60 s timeout)
// with an error naming the dead rank.
func TestPeerKilled(t *testing.T) {
	const world, victim = 3, 1
	ws := spawnWorld(t, "loop", world)
	require.Eventually(t, func() bool {
		for _, w := range ws {
			if !strings.Contains(w.stdout.String(), "ready") {
				return false
			}
		}
		return true
	}, 60*time.Second, 10*time.Millisecond)
	start := time.Now()
	require.NoError(t, ws[victim].cmd.Process.Signal(syscall.SIGKILL))
	codes := waitAll(t, ws, 30*time.Second)
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, -int(syscall.SIGKILL), codes[victim])
	for r, w := range ws {
		if r == victim {
			continue
		}
		msg := w.stderr.String()
		t.Logf("rank %d: %s", r, msg)
		assert.Equal(t, 3, codes[r], "rank %d: %s", r, msg)
		assert.Contains(t, msg, "comm: peer failed", "rank %d", r)
		assert.Contains(t, msg, fmt.Sprintf("rank %d", victim), "rank %d", r)
		assert.Contains(t, msg, "allreduce #", "rank %d", r)
	}
}
