package launch

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// Sentinel errors. Every error Run returns wraps exactly one of them, and
// ExitCode maps them to ddprun's documented exit codes.
var (
	// ErrUsage: bad flags or an inconsistent Config (exit code 2).
	ErrUsage = errors.New("launch: usage error")
	// ErrWorkerFailed: a worker exited non-zero or died by a signal and no
	// restarts were left (exit code 1).
	ErrWorkerFailed = errors.New("launch: worker failed")
	// ErrRendezvous: the store could not be hosted or reached, or the nodes
	// did not meet before the rendezvous timeout (exit code 3).
	ErrRendezvous = errors.New("launch: rendezvous failed")
	// ErrProgram: PROGRAM is missing, is not executable, or does not build
	// (exit code 4).
	ErrProgram = errors.New("launch: program error")
	// ErrNoGPU: a GPU was asked for (--nproc-per-node gpu, a PROGRAM
	// linking gorgonia.org/cu, GODDP_REQUIRES_GPU=1) but NVML reports none
	// visible (exit code 5).
	ErrNoGPU = errors.New("launch: no GPU")
	// ErrInterrupted: the launcher was stopped by a signal or its context
	// ended; the workers were stopped (exit code 128+signal, or 130).
	ErrInterrupted = errors.New("launch: interrupted")
	// ErrHelp is returned by ParseArgs for -h/--help.
	ErrHelp = errors.New("launch: help requested")
)

// Exit codes of ddprun (see docs/launcher.md). A run stopped by signal N
// exits with 128+N, as shells report it.
const (
	ExitOK           = 0
	ExitWorkerFailed = 1
	ExitUsage        = 2
	ExitRendezvous   = 3
	ExitProgram      = 4
	ExitNoGPU        = 5
)

// SignalError is the cause given to a context canceled because the launcher
// received a signal (context.WithCancelCause). Run forwards that signal to
// the workers and returns a SignalError, which matches ErrInterrupted.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string {
	return fmt.Sprintf("%v: received %s", ErrInterrupted, signalName(e.Signal))
}

func (e *SignalError) Is(target error) bool { return target == ErrInterrupted }

// ExitCode maps an error returned by Run, Spawn or ParseArgs to the exit
// code ddprun uses.
func ExitCode(err error) int {
	var se *SignalError
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return ExitOK
	case errors.As(err, &se):
		return 128 + int(se.Signal)
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrRendezvous):
		return ExitRendezvous
	case errors.Is(err, ErrProgram):
		return ExitProgram
	case errors.Is(err, ErrNoGPU):
		return ExitNoGPU
	case errors.Is(err, ErrInterrupted), errors.Is(err, context.Canceled):
		return 128 + int(syscall.SIGINT)
	}
	return ExitWorkerFailed
}

func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
