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

	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/internal/bytesize"
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
	assert.Equal(t, "64M", bytesize.Format(64<<20))
	assert.Equal(t, "1000", bytesize.Format(1000))
}

func TestBusFactor(t *testing.T) {
	assert.Equal(t, 1.0, busFactor("allreduce", 2))
	assert.Equal(t, 1.5, busFactor("allreduce", 4))
	assert.Equal(t, 0.75, busFactor("allgather", 4))
	assert.Equal(t, 0.5, busFactor("reducescatter", 2))
	assert.Equal(t, 1.0, busFactor("broadcast", 8))
}

// -backend given on the command line wins; left out, GODDP_BACKEND does
// (the flag's old default "auto" overrode it).
func TestBackendFromEnv(t *testing.T) {
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "1")
	t.Setenv("GODDP_BACKEND", "shm")
	cfg, err := parseArgs([]string{"allreduce"}, &bytes.Buffer{})
	require.NoError(t, err)
	ccfg, err := rankConfig(cfg)
	require.NoError(t, err)
	assert.Equal(t, "shm", ccfg.Backend)

	cfg, err = parseArgs([]string{"allreduce", "-backend", "tcp"}, &bytes.Buffer{})
	require.NoError(t, err)
	ccfg, err = rankConfig(cfg)
	require.NoError(t, err)
	assert.Equal(t, "tcp", ccfg.Backend)
}

// -bind's default pins host-backend ranks and never nccl's, whose proxy
// threads would otherwise share the rank's one core (and one P).
func TestBindPlan(t *testing.T) {
	for _, tc := range []struct {
		bind, backend    string
		world, ncpu      int
		wantPin, wantOne bool
	}{
		{"auto", "shm", 2, 4, true, true},
		{"auto", "tcp", 8, 4, false, false}, // oversubscribed
		{"auto", "nccl", 2, 64, false, false},
		{"core", "nccl", 2, 64, true, false},
		{"core", "shm", 2, 4, true, true},
		{"none", "shm", 2, 4, false, false},
	} {
		pin, one := bindPlan(tc.bind, tc.backend, tc.world, tc.ncpu)
		assert.Equal(t, tc.wantPin, pin, "%+v", tc)
		assert.Equal(t, tc.wantOne, one, "%+v", tc)
	}
	_, err := parseArgs([]string{"allreduce", "-bind", "socket"}, &bytes.Buffer{})
	assert.Error(t, err)
}

// Over nccl on a machine without a GPU ddpbench ends with exit code 5 and
// says what is missing, whether it spawned its ranks or not.
func TestNCCLWithoutGPU(t *testing.T) {
	if os.Getenv("RANK") != "" {
		t.Skip("RANK is set")
	}
	if _, err := nccl.Probe(); err == nil {
		t.Skip("this machine can run nccl")
	}
	var out, errb bytes.Buffer
	code := mainWithExitCode([]string{"allreduce", "-backend", "nccl", "-nproc", "1", "-max", "4K", "-timeout", "20s"}, &out, &errb)
	assert.Equal(t, exitNoGPU, code, errb.String())
	assert.Regexp(t, "no usable CUDA device|libcuda.so.1|libnccl.so.2", errb.String())
}

// -mem device wants the nccl backend.
func TestMemDeviceNeedsNCCL(t *testing.T) {
	if os.Getenv("RANK") != "" {
		t.Skip("RANK is set")
	}
	var out, errb bytes.Buffer
	code := mainWithExitCode([]string{"allreduce", "-backend", "shm", "-mem", "device", "-nproc", "1", "-max", "4K"}, &out, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "-mem device needs the nccl backend")
	_, err := parseArgs([]string{"allreduce", "-mem", "unified"}, &errb)
	assert.Error(t, err)
}
