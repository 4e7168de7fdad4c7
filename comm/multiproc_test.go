package comm

import (
	"fmt"
	"github.com/goddp/goddp/internal/proctest"
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
			proctest.RequireSuccess(t, spawnWorld(t, "cases", world, false, "GODDP_TCP_PIECE_BYTES=16384").Wait())
		})
	}
}

// TestPeerKilled kills one rank with SIGKILL while the others are inside
// all-reduces: the survivors must fail promptly (not at the 60 s timeout)
// with an error naming the dead rank.
func TestPeerKilled(t *testing.T) {
	const world, victim = 3, 1
	w := spawnWorld(t, "loop", world, true)
	require.Eventually(t, func() bool {
		for _, p := range w.Procs {
			if !strings.Contains(p.Stdout(), "ready") {
				return false
			}
		}
		return true
	}, 60*time.Second, 10*time.Millisecond)
	start := time.Now()
	require.NoError(t, w.Procs[victim].Signal(syscall.SIGKILL))
	res := w.Wait()
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, -int(syscall.SIGKILL), res[victim].Code)
	for r, rr := range res {
		if r == victim {
			continue
		}
		msg := rr.Stderr
		t.Logf("rank %d: %s", r, msg)
		assert.Equal(t, 3, rr.Code, "rank %d: %s", r, msg)
		assert.Contains(t, msg, "comm: peer failed", "rank %d", r)
		assert.Contains(t, msg, fmt.Sprintf("rank %d", victim), "rank %d", r)
		assert.Contains(t, msg, "allreduce #", "rank %d", r)
	}
}
