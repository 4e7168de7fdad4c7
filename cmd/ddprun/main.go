// Command ddprun is goddp's torchrun: it starts, supervises and restarts the
// workers of a data-parallel job on one or many nodes.
//
//	ddprun --standalone --nproc-per-node 4 ./examples/linear -epochs 10
//	ddprun --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --nproc-per-node 8 ./train
//
// Run `ddprun --help` for the flags and exit codes; docs/launcher.md has
// multi-node, Slurm and Kubernetes recipes. The logic lives in package
// goddp/launch; this file only wires flags, signals and the exit status.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/goddp/goddp/launch"
)

func main() {
	os.Exit(ddprun(os.Args[1:], os.Stdout, os.Stderr))
}

// ddprun runs the launcher and returns its exit status.
func ddprun(args []string, stdout, stderr io.Writer) int {
	cfg, err := launch.ParseArgs(args)
	if errors.Is(err, launch.ErrHelp) {
		fmt.Fprint(stdout, launch.Usage())
		return launch.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "ddprun: error: %v\n", err)
		return launch.ExitCode(err)
	}
	cfg.Stdout, cfg.Stderr = stdout, stderr

	// SIGINT/SIGTERM/SIGHUP/SIGQUIT end the context with the signal as its
	// cause; Run forwards that signal to the workers' process groups.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			if sig, ok := s.(syscall.Signal); ok {
				cancel(&launch.SignalError{Signal: sig})
			}
		}
	}()

	err = launch.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "ddprun: error: %v\n", err)
	}
	return launch.ExitCode(err)
}
