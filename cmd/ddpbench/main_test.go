package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary stand in for ddpbench: the launcher
// re-executes its own executable (this binary) for every rank.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(mainWithExitCode(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestCSVSweep(t *testing.T) {
	if os.Getenv("RANK") != "" {
		t.Skip("RANK is set: ddpbench would join that job instead of spawning ranks")
	}
	for _, tc := range []struct {
		collective, backend string
	}{
		{"allreduce", "shm"},
		{"allreduce", "tcp"},
		{"allgather", "shm"},
		{"reducescatter", "shm"},
		{"broadcast", "auto"},
	} {
		t.Run(tc.collective+"/"+tc.backend, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := mainWithExitCode([]string{tc.collective, "-backend", tc.backend, "-nproc", "2",
				"-max", "64K", "-iters", "20", "-format", "csv"}, &out, &errb)
			require.Equal(t, 0, code, "stderr:\n%s", errb.String())
			rows, err := csv.NewReader(&out).ReadAll()
			require.NoError(t, err, out.String())
			require.Len(t, rows, 1+5, out.String()) // header + 4K..64K
			require.True(t, strings.HasPrefix(strings.Join(rows[0], ","), "bytes,count,dtype,time_us,algbw_gbps,busbw_gbps"))
			col := map[string]int{}
			for i, h := range rows[0] {
				col[h] = i
			}
			size := int64(4096)
			for _, r := range rows[1:] {
				b, err := strconv.ParseInt(r[col["bytes"]], 10, 64)
				require.NoError(t, err)
				assert.Equal(t, size, b)
				size *= 2
				us, err := strconv.ParseFloat(r[col["time_us"]], 64)
				require.NoError(t, err)
				bus, err := strconv.ParseFloat(r[col["busbw_gbps"]], 64)
				require.NoError(t, err)
				alg, err := strconv.ParseFloat(r[col["algbw_gbps"]], 64)
				require.NoError(t, err)
				assert.Greater(t, us, 0.0)
				assert.InDelta(t, float64(b)/us/1e3, alg, alg*0.01+1e-3)
				assert.InDelta(t, alg*busFactor(tc.collective, 2), bus, bus*0.01+1e-3)
				if tc.backend != "auto" {
					assert.Equal(t, tc.backend, r[col["backend"]])
				}
			}
		})
	}
}

func TestTableAndPlot(t *testing.T) {
	if os.Getenv("RANK") != "" {
		t.Skip("RANK is set")
	}
	png := filepath.Join(t.TempDir(), "bw.png")
	var out, errb bytes.Buffer
	code := mainWithExitCode([]string{"allreduce", "-backend", "shm", "-nproc", "2", "-min", "4K", "-max", "16K",
		"-iters", "10", "-plot", png}, &out, &errb)
	require.Equal(t, 0, code, "stderr:\n%s", errb.String())
	assert.Contains(t, out.String(), "busbw_GB/s")
	assert.Contains(t, out.String(), "Avg bus bandwidth")
	st, err := os.Stat(png)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(1000))
}

func TestParseArgs(t *testing.T) {
	var errb bytes.Buffer
	for _, bad := range [][]string{
		nil, {"-backend", "shm"}, {"allfoo"}, {"allreduce", "-max", "1Q"}, {"allreduce", "-min", "8K", "-max", "4K"},
		{"allreduce", "-format", "xml"}, {"allreduce", "-dtype", "int8"}, {"allreduce", "extra"},
	} {
		_, err := parseArgs(bad, &errb)
		assert.Error(t, err, "%q", bad)
	}
	c, err := parseArgs([]string{"reducescatter", "-min", "1k", "-max", "2MiB", "-dtype", "bfloat16", "-op", "max"}, &errb)
	require.NoError(t, err)
	assert.Equal(t, int64(1024), c.min)
	assert.Equal(t, int64(2<<20), c.max)
	assert.Equal(t, "bfloat16", c.dtype.String())
	assert.Equal(t, "max", c.op.String())
	assert.Equal(t, "64M", formatSize(64<<20))
	assert.Equal(t, "1000", formatSize(1000))
}

func TestBusFactor(t *testing.T) {
	assert.Equal(t, 1.0, busFactor("allreduce", 2))
	assert.Equal(t, 1.5, busFactor("allreduce", 4))
	assert.Equal(t, 0.75, busFactor("allgather", 4))
	assert.Equal(t, 0.5, busFactor("reducescatter", 2))
	assert.Equal(t, 1.0, busFactor("broadcast", 8))
}
