package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTCPMismatchFailsFast (issue 24, item 4): collprobe's rank 1 issues
// another collective than the other ranks (another kind, reduce op, size or
// dtype), on the tcp backend and without GODDP_DEBUG_COLLECTIVES. Every rank
// must exit 1 within 5 s of the last rank issuing it, well before the 60 s
// timeout, with an error that names both collectives, and none may print a
// result. Before, all-reduce against broadcast hung to the timeout and sum
// against max completed with different results on each rank.
func TestTCPMismatchFailsFast(t *testing.T) {
	skipShort(t)
	bin := buildProgram(t, "./testdata/collprobe")
	// What rank 1 issues in each mode; the others issue sum16.
	const sum16 = "allreduce(sum, float32, 16 B)"
	rank1 := map[string]string{
		"kind":  "broadcast(root 0, float32, 16 B)",
		"op":    "allreduce(max, float32, 16 B)",
		"size":  "allreduce(sum, float32, 32 B)",
		"dtype": "allreduce(sum, float64, 16 B)",
	}
	for _, tc := range []struct {
		n    int
		mode string
	}{{2, "kind"}, {2, "op"}, {2, "size"}, {2, "dtype"}, {3, "kind"}, {3, "op"}} {
		t.Run(fmt.Sprintf("%d ranks %s", tc.n, tc.mode), func(t *testing.T) {
			ws := startProgram(t, bin, tc.n, []string{"GODDP_BACKEND=tcp", "GODDP_TIMEOUT=60s"}, "-mismatch", tc.mode)
			began := time.Now()
			issued := lastIssued(t, ws, began)
			// Rank 1 and a rank that issued sum16, lower rank first.
			named := regexp.MustCompile(fmt.Sprintf(`collective #\d+ mismatch: (rank 0 issued %s, rank 1 issued %s|rank 1 issued %[2]s, rank 2 issued %[1]s)`,
				regexp.QuoteMeta(sum16), regexp.QuoteMeta(rank1[tc.mode])))
			for _, w := range ws {
				code, _ := w.wait(t, began, 90*time.Second)
				took := w.ended.Sub(issued)
				errs := w.stderr.String()
				t.Logf("rank %d exited %d %v after the mismatch: %s", w.rank, code, took.Round(time.Millisecond), strings.TrimSpace(tail(errs, 1)))
				assert.Equal(t, 1, code, "rank %d must fail", w.rank)
				assert.Less(t, took, 5*time.Second, "rank %d: a mismatch fails at once, not at the timeout", w.rank)
				assert.Regexp(t, named, errs, "rank %d names both collectives", w.rank)
				assert.NotContains(t, w.stdout.String(), "result", "rank %d completed the mismatched collective", w.rank)
			}
		})
	}
}

// lastIssued waits until every worker has printed that it issues its
// second collective and returns when the last one did (to 5 ms).
func lastIssued(t *testing.T, ws []*worker, began time.Time) time.Time {
	t.Helper()
	seen := make([]bool, len(ws))
	for left := len(ws); left > 0; {
		for i, w := range ws {
			if !seen[i] && strings.Contains(w.stdout.String(), "issuing the second collective") {
				seen[i] = true
				left--
			}
		}
		if left == 0 {
			break
		}
		for i, w := range ws {
			select {
			case <-w.done:
				if !seen[i] && !strings.Contains(w.stdout.String(), "issuing the second collective") {
					require.Failf(t, "worker exited early", "rank %d exited %d before the second collective: %s", w.rank, w.code, w.stderr.String())
				}
			default:
			}
		}
		require.Less(t, time.Since(began), 60*time.Second, "the ranks never reached the second collective")
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now()
}
