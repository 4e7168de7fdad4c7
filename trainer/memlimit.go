package trainer

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memLimitShare is the part of the machine's memory the soft limit gives
// the local ranks together: the rest is for the kernel's page cache, the
// launcher, and the memory Go does not count (thread stacks, C's heap).
const memLimitShare = 0.9

// setMemoryLimit gives the Go runtime a soft memory limit when the user
// set none (GOMEMLIMIT): memLimitShare of the machine's memory (or of the
// cgroup's limit, when lower), divided among the machine's localWorld
// ranks. Why: a training step frees gigabytes of activations at once, and
// with only GOGC=100 the collector lets that garbage reach the live heap's
// size again before it runs; GPT-2 124M at T=1024 then grew past 12 GB a
// rank and two ranks were killed by the kernel on a 23 GB machine. Under a
// limit the collector runs when the heap nears the rank's share instead.
// It returns the limit set (0: none, the user's GOMEMLIMIT or an unknown
// machine size).
func setMemoryLimit(localWorld int) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := memLimitFor(machineMemory(), cgroupMemory(), localWorld)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit
}

// memLimitFor is one rank's share: memLimitShare of the smaller of the
// machine's and the cgroup's memory (0: unknown), over localWorld ranks.
func memLimitFor(machine, cgroup int64, localWorld int) int64 {
	total := machine
	if cgroup > 0 && (total <= 0 || cgroup < total) {
		total = cgroup
	}
	if total <= 0 {
		return 0
	}
	return int64(memLimitShare * float64(total) / float64(max(localWorld, 1)))
}

// machineMemory is /proc/meminfo's MemTotal in bytes (0 off Linux).
func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// cgroupMemory is cgroup v2's memory.max in bytes (0: none or "max").
func cgroupMemory() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
