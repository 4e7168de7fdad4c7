//go:build !cuda

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/goddp/goddp/internal/proctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test re-execute its binary as one rank of the example
// (through internal/proctest); the rank's flags are its arguments.
func TestMain(m *testing.M) {
	proctest.Main(m, map[string]func() error{"rank": func() error { return run(os.Args[1:], os.Stdout) }})
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

	res := proctest.Run(t, proctest.Options{Worker: "rank", World: 2, Timeout: 90 * time.Second,
		Args: append(args, "-batch", "16"),
		Env:  []string{"GODDP_BACKEND=tcp", "GODDP_INIT_METHOD=env://", "GODDP_TIMEOUT=60s"}})
	proctest.RequireSuccess(t, res)
	wTwo, lossTwo := parseOut(t, res[0].Stdout)
	assert.InDelta(t, wOne, wTwo, 1e-4)
	assert.InDelta(t, lossOne, lossTwo, 1e-5)
	assert.Contains(t, one.String(), "epoch 2 | loss")
}
