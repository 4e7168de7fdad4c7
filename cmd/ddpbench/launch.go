package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
)

// launch spawns cfg.nproc copies of this executable as ranks 0..n-1 on
// loopback and waits for them. Rank 0's stdout is ours; every rank's stderr
// is ours. If one rank fails the others are stopped.
func launch(ctx context.Context, cfg benchConfig, args []string, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := cfg.nproc
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"GODDP_TOKEN="+hex.EncodeToString(tok[:]),
			childEnv+"=1")
		if r == 0 {
			cmd.Stdout = stdout
		}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("start rank %d: %w", r, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.ExitCode() == exitNoGPU {
					err = errRankNoGPU
				}
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				cancel() // a failed rank stops the job
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// childEnv marks a process spawned by launch (the test binary uses it to
// act as ddpbench).
const childEnv = "GODDP_DDPBENCH_CHILD"

// freePort asks the kernel for an unused loopback port. Another process
// could take it before rank 0 binds it; the window is tiny.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
