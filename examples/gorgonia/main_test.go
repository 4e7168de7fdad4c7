//go:build !cuda

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test re-execute its binary as one rank of the example.
func TestMain(m *testing.M) {
	if os.Getenv("GODDP_EXAMPLE_WORKER") == "1" {
		if err := run(os.Args[1:], os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var weightsRe = regexp.MustCompile(`weights_sum=(\S+)\nfinal_loss=(\S+)`)

func parseOut(t *testing.T, out string) (w, loss float64) {
	t.Helper()
	m := weightsRe.FindStringSubmatch(out)
	require.NotNil(t, m, "output:\n%s", out)
	w, _ = strconv.ParseFloat(m[1], 64)
	loss, _ = strconv.ParseFloat(m[2], 64)
	return w, loss
}

// Two ranks with batch 16 each end where one process with batch 32 does.
func TestTwoRanksMatchOne(t *testing.T) {
	args := []string{"-epochs", "3", "-samples", "256"}
	t.Setenv("GODDP_INIT_METHOD", "file://"+filepath.Join(t.TempDir(), "store1"))
	var one bytes.Buffer
	require.NoError(t, run(append(args, "-batch", "32"), &one))
	wOne, lossOne := parseOut(t, one.String())

	dir := t.TempDir()
	outs := make([]bytes.Buffer, 2)
	errs := make([]bytes.Buffer, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		cmd := exec.Command(os.Args[0], append(args, "-batch", "16")...)
		cmd.Env = append(os.Environ(), "GODDP_EXAMPLE_WORKER=1", "RANK="+strconv.Itoa(r), "WORLD_SIZE=2",
			"GODDP_BACKEND=tcp", "GODDP_INIT_METHOD=file://"+filepath.Join(dir, "store2"), "GODDP_TIMEOUT=60s")
		cmd.Stdout, cmd.Stderr = &outs[r], &errs[r]
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.AfterFunc(90*time.Second, func() { cmd.Process.Kill() })
			defer timer.Stop()
			assert.NoError(t, cmd.Wait(), "rank %d: %s", r, errs[r].String())
		}()
	}
	wg.Wait()
	wTwo, lossTwo := parseOut(t, outs[0].String())
	assert.InDelta(t, wOne, wTwo, 1e-4)
	assert.InDelta(t, lossOne, lossTwo, 1e-5)
	assert.Contains(t, one.String(), "epoch 2 | loss")
}
