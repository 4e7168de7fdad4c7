package proctest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()                        {}
func (f *fatalTB) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

// A failed run shows every rank's output, the ranks that exited 0 too: the
// shm flake of issue 43 showed "rank 1 closed the group" from rank 0 and
// nothing of rank 1, which had exited 0.
func TestRequireSuccessShowsEveryRank(t *testing.T) {
	res := []Result{
		{Rank: 0, Code: 1, Stderr: "send #121: rank 1 closed the group"},
		{Rank: 1, Code: 0, Stdout: "rank 1 finished its part"},
	}
	f := &fatalTB{TB: t}
	RequireSuccess(f, res)
	assert.Contains(t, f.msg, "rank 0 exited 1")
	assert.Contains(t, f.msg, "rank 1 closed the group")
	assert.Contains(t, f.msg, "rank 1 exited 0")
	assert.Contains(t, f.msg, "rank 1 finished its part")

	f = &fatalTB{TB: t}
	RequireSuccess(f, []Result{{Rank: 0}, {Rank: 1}})
	assert.Empty(t, f.msg, "a run where every rank exited 0 passes")
}
