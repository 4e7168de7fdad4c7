package e2e

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// launcherKillsEnv sets how many times TestKill9LauncherLeavesNoTempDirs
// kills ddprun (issue 24's bar, 50, is the default; each kill costs about
// a second and a half, mostly the workers' start-up).
const launcherKillsEnv = "GODDP_E2E_LAUNCHER_KILLS"

// TestKill9LauncherLeavesNoTempDirs is issue 24's item 7 for the launcher:
// ddprun, building examples/linear from its package directory, is killed
// with SIGKILL at random moments of its start-up (before the build, while
// go build runs, while its workers start), then one job runs normally. After
// it, none of the killed launchers' temp dirs is left (each kill used to
// leave /tmp/ddprun-<id>-* and a 30 MB /tmp/ddprun-build-*), the build
// cache holds one binary and no scratch dir, and no shared-memory file of
// the killed jobs' workers is left in /dev/shm.
func TestKill9LauncherLeavesNoTempDirs(t *testing.T) {
	skipShort(t)
	kills := 50
	if v := os.Getenv(launcherKillsEnv); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, launcherKillsEnv)
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("%d kills, seed %d", kills, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	require.NoError(t, err)
	tmp, cache := t.TempDir(), t.TempDir()
	// XDG_CACHE_HOME moves ddprun's build cache; GOCACHE keeps the go
	// command on the cache TestMain warmed, which XDG_CACHE_HOME would move.
	env := []string{"TMPDIR=" + tmp, "XDG_CACHE_HOME=" + cache, "GOCACHE=" + strings.TrimSpace(string(gocache)), "GODDP_TIMEOUT=20s"}
	pkg, err := filepath.Abs("../examples/linear")
	require.NoError(t, err)
	buildRoot := filepath.Join(cache, "goddp", "ddprun-build")

	var startup time.Duration
	var jobs []*job
	workers := map[int]bool{} // every worker pid seen, for the /dev/shm check
	moments := make([]string, 0, kills)
	for i := range kills {
		j := start(t, spec{program: pkg, args: []string{"-epochs", "100000", "-ckpt-dir", ""}, env: env})
		jobs = append(jobs, j)
		switch i {
		case 0:
			// The first build links from scratch: kill it mid-link.
			j.waitErr(regexp.MustCompile(`ddprun: building`), time.Minute)
			time.Sleep(time.Duration(rng.Int64N(int64(500 * time.Millisecond))))
		case 1, 2:
			// The second builds the binary that is kept; the third measures
			// start-up with it: from exec to workers started.
			j.waitErr(regexp.MustCompile(`started 2 worker\(s\)`), 2*time.Minute)
			startup = time.Since(j.started)
		default:
			at := time.Duration(rng.Int64N(int64(startup + time.Second)))
			time.Sleep(time.Until(j.started.Add(at)))
		}
		for _, p := range marked(j.marker) {
			if p.worker {
				workers[p.pid] = true
			}
		}
		moments = append(moments, time.Since(j.started).Round(10*time.Millisecond).String())
		j.inject(j.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-j.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("ddprun survived SIGKILL")
		}
		// Its workers die with it (Pdeathsig), and so does its go build; a
		// compiler that go build had started may run on for a moment.
		deadline := time.Now().Add(30 * time.Second)
		for len(marked(j.marker)) > 0 {
			require.True(t, time.Now().Before(deadline), "processes of killed ddprun %d still alive", j.cmd.Process.Pid)
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("start-up %v; killed at %s", startup.Round(time.Millisecond), strings.Join(moments, " "))
	t.Logf("left by the kills: %d temp dirs, %d build scratch dirs", len(ddprunDirs(t, tmp)), len(scratchDirs(t, buildRoot)))

	final := start(t, spec{program: pkg, args: []string{"-epochs", "2", "-ckpt-dir", ""}, env: env})
	code, _ := final.wait(2 * time.Minute)
	require.Equal(t, 0, code, final.stderr.String())

	swept := 0
	for _, j := range append(jobs, final) {
		swept += strings.Count(j.stderr.String(), "left by a launcher that was killed")
	}
	t.Logf("dirs of killed launchers removed by the next launcher: %d", swept)
	assert.Empty(t, ddprunDirs(t, tmp), "temp dirs of killed launchers left after the next run")
	assert.Empty(t, scratchDirs(t, buildRoot), "build scratch dirs left after the next run")
	kept, err := filepath.Glob(filepath.Join(buildRoot, "*", "linear"))
	require.NoError(t, err)
	assert.Len(t, kept, 1, "one kept binary")
	shm, _ := filepath.Glob("/dev/shm/goddp-shm-*")
	for _, p := range shm {
		f := strings.Split(strings.TrimPrefix(filepath.Base(p), "goddp-shm-"), "-")
		if pid, err := strconv.Atoi(f[0]); err == nil && workers[pid] {
			t.Errorf("%s of a killed job's worker (pid %d) left in /dev/shm", p, pid)
		}
	}
}

// ddprunDirs lists the ddprun-* entries of dir.
func ddprunDirs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "ddprun-*"))
	require.NoError(t, err)
	return m
}

// scratchDirs lists the build scratch dirs under ddprun's build cache.
func scratchDirs(t *testing.T, root string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "*", ".build-*"))
	require.NoError(t, err)
	return m
}
