package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// cpuMask is a cpu_set_t for up to 1024 CPUs.
type cpuMask [16]uint64

func (m *cpuMask) has(cpu int) bool { return m[cpu/64]&(1<<(cpu%64)) != 0 }

// bindToCore pins every thread of this process to one CPU of those it may
// use, chosen by local rank, as OpenMPI does by default (--bind-to core
// for two ranks). On a small host this keeps two spinning ranks from
// starting on one core and waiting for the load balancer to part them.
// Threads the Go runtime starts later inherit the mask.
func bindToCore(localRank int) (int, error) {
	var allowed cpuMask
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(allowed),
		uintptr(unsafe.Pointer(&allowed))); e != 0 {
		return -1, fmt.Errorf("sched_getaffinity: %w", e)
	}
	var cpus []int
	for c := 0; c < len(allowed)*64; c++ {
		if allowed.has(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return -1, fmt.Errorf("no usable CPU")
	}
	cpu := cpus[localRank%len(cpus)]
	var m cpuMask
	m[cpu/64] |= 1 << (cpu % 64)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1, err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(m),
			uintptr(unsafe.Pointer(&m))); e != 0 && e != syscall.ESRCH {
			return -1, fmt.Errorf("sched_setaffinity thread %d: %w", tid, e)
		}
	}
	return cpu, nil
}
