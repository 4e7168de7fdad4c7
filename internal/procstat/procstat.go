package procstat

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Stat reads /proc/<pid>/stat: the process's start time (clock ticks after
// boot, field 22) and its state letter (field 3). ok is false when there is
// no such entry; start is 0 when the entry cannot be parsed.
func Stat(pid int) (start uint64, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name may hold spaces and parentheses; the fields resume
	// after the last ')': state(3) ppid ... starttime(22).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, true
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) == 0 {
		return 0, 0, true
	}
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return start, f[0][0], true
}

// Start is pid's start time, or 0 where /proc cannot tell.
func Start(pid int) uint64 {
	start, _, _ := Stat(pid)
	return start
}

// Alive reports whether the process recorded as (pid, start) still runs. A
// zombie counts as dead: it makes no more progress, and its parent may not
// reap it for a while. A start of 0 on either side (unknown) compares
// equal. Where /proc is not mounted it asks the kernel with kill(pid, 0),
// so a live process is never taken for dead: removing a live owner's file
// loses data, keeping a dead one's costs only space.
func Alive(pid int, start uint64) bool {
	st, state, ok := Stat(pid)
	if !ok {
		if _, err := os.Stat("/proc/self/stat"); err == nil {
			return false // /proc works and has no such process
		}
		return syscall.Kill(pid, 0) != syscall.ESRCH
	}
	if state == 'Z' || state == 'X' {
		return false
	}
	return start == 0 || st == 0 || st == start
}
