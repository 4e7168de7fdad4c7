package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoTokenRefused starts a 2-rank job the way srun or a hand-set
// MASTER_ADDR would, with a routable master address and no GODDP_TOKEN:
// every rank must exit at once (before it listens or dials anything) with
// an error that names GODDP_TOKEN and says how to set one. Before issue 17,
// rank 0 bound the address and let anyone read and write the store. Then
// the opt-out: with GODDP_INSECURE=1 a job whose store listens on every
// interface runs, and every rank prints the warning.
func TestNoTokenRefused(t *testing.T) {
	skipShort(t)
	// 192.0.2.1 (TEST-NET-1) is never dialled: the refusal comes first.
	ws := startWorkers(t, 2, []string{"MASTER_ADDR=192.0.2.1", "GODDP_TIMEOUT=20s"}, "-epochs", "1", "-ckpt-dir", "")
	began := time.Now()
	tally.faults.Add(1)
	for _, w := range ws {
		code, took := w.wait(t, began, 30*time.Second)
		e := strings.TrimSpace(w.stderr.String())
		t.Logf("rank %d exited %d after %v: %s", w.rank, code, took.Round(time.Millisecond), e)
		assert.Equal(t, 1, code, "rank %d", w.rank)
		assert.Less(t, took, 5*time.Second, "rank %d refuses at once, not after a timeout", w.rank)
		assert.Contains(t, e, fmt.Sprintf("comm: rank %d: comm: bad argument: refusing to listen on 192.0.2.1:", w.rank))
		assert.Contains(t, e, "GODDP_TOKEN")
		assert.Contains(t, e, "head -c 32 /dev/urandom")
	}

	port := freePort(t)
	ws = startWorkers(t, 2, []string{"GODDP_INSECURE=1", "GODDP_BACKEND=tcp", "GODDP_TIMEOUT=30s",
		fmt.Sprintf("MASTER_PORT=%d", port), fmt.Sprintf("GODDP_STORE_BIND=0.0.0.0:%d", port)},
		"-epochs", "1", "-ckpt-dir", "")
	began = time.Now()
	for _, w := range ws {
		code, took := w.wait(t, began, 60*time.Second)
		t.Logf("insecure rank %d exited %d after %v: %s", w.rank, code, took.Round(time.Millisecond), strings.TrimSpace(w.stderr.String()))
		require.Equal(t, 0, code, "rank %d: %s", w.rank, w.stderr.String())
		assert.Contains(t, w.stderr.String(),
			fmt.Sprintf("comm: WARNING: rank %d runs without a job token (GODDP_INSECURE=1)", w.rank))
	}
	assert.Regexp(t, epochLine(0), ws[0].stdout.String(), "the insecure job trained")
}
