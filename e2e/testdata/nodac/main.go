// Command nodac runs a program (its first argument, with the rest as its
// arguments) without the capabilities that let root ignore file
// permissions, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so that a test
// running as root can give it a real EACCES with chmod 000. It drops them
// from the bounding set, which execve applies to root as well, and needs
// CAP_SETPCAP; it exits 3 when it cannot drop them.
package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

const (
	prCapBSetDrop    = 24 // PR_CAPBSET_DROP, linux/prctl.h
	capDACOverride   = 1  // CAP_DAC_OVERRIDE, linux/capability.h
	capDACReadSearch = 2  // CAP_DAC_READ_SEARCH
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodac PROGRAM [ARG...]")
		os.Exit(2)
	}
	// The bounding set is a thread's: drop and exec on one thread.
	runtime.LockOSThread()
	for _, c := range []uintptr{capDACOverride, capDACReadSearch} {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prCapBSetDrop, c, 0); e != 0 {
			fmt.Fprintf(os.Stderr, "nodac: prctl(PR_CAPBSET_DROP, %d): %v\n", c, e)
			os.Exit(3)
		}
	}
	err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "nodac: exec %s: %v\n", os.Args[1], err)
	os.Exit(3)
}
