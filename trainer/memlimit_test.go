package trainer

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMemLimitFor(t *testing.T) {
	const gb = int64(1) << 30
	share := func(b int64, ranks float64) int64 { return int64(memLimitShare * float64(b) / ranks) }
	assert.Equal(t, share(24*gb, 2), memLimitFor(24*gb, 0, 2), "the machine's memory over its 2 ranks")
	assert.Equal(t, share(8*gb, 2), memLimitFor(24*gb, 8*gb, 2), "a cgroup limit below the machine's wins")
	assert.Equal(t, share(24*gb, 1), memLimitFor(24*gb, 64*gb, 1))
	assert.Equal(t, share(8*gb, 1), memLimitFor(0, 8*gb, 0))
	assert.Zero(t, memLimitFor(0, 0, 2), "unknown: no limit")
}

// Main sets the limit unless GOMEMLIMIT is the user's.
func TestSetMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	if machineMemory() == 0 {
		t.Skip("no /proc/meminfo")
	}
	t.Setenv("GOMEMLIMIT", "")
	got := setMemoryLimit(2)
	assert.Positive(t, got)
	assert.Equal(t, got, debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "1GiB")
	assert.Zero(t, setMemoryLimit(2))
	assert.Equal(t, old, debug.SetMemoryLimit(-1), "the user's GOMEMLIMIT is left alone")
}
