package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStallInspector stops rank 1 for 3 s (SIGSTOP, then SIGCONT) in the
// middle of training with GODDP_STALL_THRESHOLD=1s: rank 0 must log which
// rank has not arrived at which collective (sequence number, op, bytes), and
// training must then complete.
func TestStallInspector(t *testing.T) {
	skipShort(t)
	tests := []struct {
		backend string
		want    string
	}{
		// The stop may catch rank 1 at a gradient bucket (84 bytes of
		// float32), at an epoch's end, where the trainer agrees on
		// stopping (2 float64s, max), or at the epoch's metrics, which it
		// gathers: either way rank 0 names the op, its
		// number, its size and the missing rank.
		{"tcp", `comm: stall: (allreduce #\d+ \((84|16) bytes\)|allgather #\d+ \(\d+ bytes\)) has waited [1-9]s on rank 0; not arrived: rank 1 \(no answer\)`},
		{"shm", `comm: shm (allreduce #\d+ \((84 bytes float32 (sum|avg)|16 bytes float64 max)\)|allgather #\d+ \(\d+ bytes float64\)) on rank 0 has waited [1-9]s for rank 1 to \w+`},
	}
	for _, tc := range tests {
		t.Run(tc.backend, func(t *testing.T) {
			j := start(t, spec{args: []string{"-epochs", "150", "-ckpt-dir", ""}, logDir: true,
				env: []string{"GODDP_BACKEND=" + tc.backend, "GODDP_STALL_THRESHOLD=1s", "GODDP_TIMEOUT=30s"}})
			ws := j.workers(2, 0, 30*time.Second)
			j.waitOut(epochLine(3), 30*time.Second)
			j.inject(ws[1], syscall.SIGSTOP)
			waitStopped(t, ws[1])
			time.Sleep(3 * time.Second)
			signal(t, ws[1], syscall.SIGCONT)
			code, took := j.wait(90 * time.Second)
			t.Logf("job took %v", took.Round(time.Millisecond))
			require.Equal(t, 0, code, j.stderr.String())
			assert.Contains(t, j.stdout.String(), "samples_per_s=")
			rank0 := j.workerLog(0, 0, "stderr")
			assert.Regexp(t, tc.want, rank0)
			for _, l := range strings.Split(rank0, "\n") {
				if strings.Contains(l, "stall") || strings.Contains(l, "waited") {
					t.Logf("rank 0: %s", l)
				}
			}
		})
	}
}

// TestTimeline: `linear -epochs 2 -timeline out.json` under ddprun writes
// a Chrome trace (JSON array of events) holding forward, backward, bucket
// all-reduce and optimizer spans for both ranks, plus each rank's own file.
func TestTimeline(t *testing.T) {
	skipShort(t)
	j := start(t, spec{args: []string{"-epochs", "2", "-ckpt-dir", "", "-timeline", "out.json"}})
	code, _ := j.wait(60 * time.Second)
	require.Equal(t, 0, code, j.stderr.String())
	type event struct {
		Name string   `json:"name"`
		Ph   string   `json:"ph"`
		Ts   *float64 `json:"ts"`
		Dur  *float64 `json:"dur"`
		Pid  *int     `json:"pid"`
		Tid  *int     `json:"tid"`
	}
	read := func(path string) []event {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var evs []event
		require.NoError(t, json.Unmarshal(b, &evs), "%s is a JSON array of trace events", path)
		return evs
	}
	merged := read(filepath.Join(j.dir, "out.json"))
	counts := map[int]map[string]int{}
	for _, e := range merged {
		require.NotNil(t, e.Pid, "pid")
		require.NotNil(t, e.Tid, "tid")
		require.NotEmpty(t, e.Name)
		require.Contains(t, []string{"X", "M"}, e.Ph)
		if e.Ph != "X" {
			continue
		}
		require.NotNil(t, e.Ts, e.Name)
		require.NotNil(t, e.Dur, e.Name)
		assert.GreaterOrEqual(t, *e.Dur, 0.0, e.Name)
		if counts[*e.Pid] == nil {
			counts[*e.Pid] = map[string]int{}
		}
		counts[*e.Pid][e.Name]++
	}
	require.Len(t, counts, 2, "events of both ranks")
	steps := 2 * 32 // 2 epochs of 32 steps per rank
	for rank := range 2 {
		c := counts[rank]
		for _, name := range []string{"forward", "backward", "allreduce bucket 0", "optimizer"} {
			assert.Equal(t, steps, c[name], "rank %d: %q events", rank, name)
		}
		own := read(filepath.Join(j.dir, "out.json.rank"+string(rune('0'+rank))+".json"))
		for _, e := range own {
			assert.Equal(t, rank, *e.Pid)
		}
	}
}

// TestDebugCollectives trains with GODDP_DEBUG_COLLECTIVES=1 on both
// backends: every collective is checked for op, dtype and size agreement
// across ranks, and a correct program passes all the checks.
func TestDebugCollectives(t *testing.T) {
	skipShort(t)
	for _, backend := range []string{"tcp", "shm"} {
		t.Run(backend, func(t *testing.T) {
			j := start(t, spec{args: []string{"-epochs", "3", "-save-every", "1", "-ckpt-dir", "ck"},
				env: []string{"GODDP_BACKEND=" + backend, "GODDP_DEBUG_COLLECTIVES=1", "GODDP_TIMEOUT=30s"}})
			code, _ := j.wait(60 * time.Second)
			require.Equal(t, 0, code, j.stderr.String())
			assert.Contains(t, j.stdout.String(), "backend="+backend)
			assert.Contains(t, j.stdout.String(), "Epoch 2 | Training checkpoint saved")
		})
	}
}
