package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/goddp/goddp/comm/nccl"
)

func main() {
	os.Exit(mainWithExitCode(os.Args[1:], os.Stdout, os.Stderr))
}

// mainWithExitCode runs ddpbench (launcher or rank) and returns the exit code.
func mainWithExitCode(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && args[0] == "sync" {
		return syncMain(ctx, args[1:], stdout, stderr) // sync.go
	}
	cfg, err := parseArgs(args, stderr)
	if err != nil {
		if err == errUsage {
			return 2
		}
		fmt.Fprintln(stderr, "ddpbench:", err)
		return 2
	}
	if !startedByLauncher() {
		err = launch(ctx, cfg, args, stdout, stderr)
	} else {
		err = runRank(ctx, cfg, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ddpbench:", err)
		if noGPU(err) {
			return exitNoGPU
		}
		return 1
	}
	return 0
}

// exitNoGPU is the exit code when the backend found no usable GPU, as
// ddprun's.
const exitNoGPU = 5

// errRankNoGPU: a spawned rank exited with exitNoGPU (it printed why).
var errRankNoGPU = errors.New("no usable GPU")

// noGPU reports whether err says a GPU, its driver or NCCL is missing.
func noGPU(err error) bool {
	for _, e := range []error{nccl.ErrNoDriver, nccl.ErrNoDevice, nccl.ErrNoLibrary, nccl.ErrNoCgo, errRankNoGPU} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// startedByLauncher reports whether a launcher already started this process
// as one rank: ddprun/torchrun (RANK), mpirun (OMPI_COMM_WORLD_RANK, MPICH's
// PMI_RANK) or srun (SLURM_PROCID). Otherwise ddpbench spawns its own ranks.
func startedByLauncher() bool {
	for _, k := range []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}
