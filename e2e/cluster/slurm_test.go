package cluster

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slurmPackages are Debian's Slurm daemons, its client commands and munge,
// Slurm's authentication (scripts/setup-test.sh installs the same).
var slurmPackages = []string{"slurmctld", "slurmd", "slurm-client", "munge"}

// requireSlurm installs Slurm when a command is missing, or skips saying why.
func requireSlurm(t *testing.T) {
	t.Helper()
	requireRoot(t)
	requireCommands(t, []string{"slurmctld", "slurmd", "srun", "sbatch", "sinfo", "scontrol", "munged"}, slurmPackages)
}

// requireCommands installs pkgs with apt-get when one of cmds is missing,
// and skips the test, saying why, when that does not bring them all.
func requireCommands(t *testing.T, cmds, pkgs []string) {
	t.Helper()
	missing := func() []string {
		var m []string
		for _, c := range cmds {
			if _, err := exec.LookPath(c); err != nil {
				m = append(m, c)
			}
		}
		return m
	}
	if len(missing()) == 0 {
		return
	}
	install := exec.Command("apt-get", append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)...)
	install.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := install.CombinedOutput()
	if m := missing(); len(m) > 0 {
		t.Skipf("cluster: %s not installed and apt-get install %s failed: %v\n%s",
			strings.Join(m, ", "), strings.Join(pkgs, " "), err, out)
	}
}

// slurm is a running cluster: munged, slurmctld on node0, and a slurmd on
// each node, all from files in one temporary directory. Each slurmd runs in
// its own node (network namespace and host name) rather than as Slurm's
// "multiple slurmd" on one host (NodeHostname/Port): that mode puts every
// task on one host name and address, so comm would see one node, the
// master would be reached over loopback, and nothing would cross a link.
type slurm struct {
	*nodes
	dir  string
	conf string
}

// slurmConf is a minimal cluster without cgroups, accounting or a database,
// with every path in the test's directory (%n: the node's name) so that two
// slurmd on one file system never share a file. The two nodes are declared
// with 2 CPUs each, as `--ntasks-per-node 2` needs; ReturnToService=2 lets a
// node that was down come back as soon as its slurmd registers.
// `sbatch --wait` polls every 2 s, then 8, then 32 while that is under a
// third of MinJobAge (default 300): MinJobAge=6 keeps it at 2 s, or a 11 s
// job would take 42.
const slurmConf = `ClusterName=goddptest
SlurmctldHost={{node0}}({{addr0}})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={{dir}}/munge/munge.socket
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation={{dir}}/state
SlurmdSpoolDir={{dir}}/spool/%n
SlurmctldPidFile={{dir}}/slurmctld.pid
SlurmdPidFile={{dir}}/slurmd.%n.pid
SlurmctldLogFile={{dir}}/slurmctld.log
SlurmdLogFile={{dir}}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=6
KillWait=5
SlurmctldDebug=info
SlurmdDebug=info
NodeName={{node0}} NodeAddr={{addr0}} NodeHostname={{node0}} CPUs=2 State=UNKNOWN
NodeName={{node1}} NodeAddr={{addr1}} NodeHostname={{node1}} CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={{node0}},{{node1}} Default=YES MaxTime=INFINITE State=UP
`

// startSlurm starts munged, slurmctld and two slurmd and waits until both
// nodes are idle. Everything is stopped when the test ends.
func startSlurm(t *testing.T) *slurm {
	t.Helper()
	requireSlurm(t)
	n := newNodes(t)
	dir, err := os.MkdirTemp("", "goddp-slurm-")
	require.NoError(t, err)
	// The daemons' logs go to their stderr too, which the test shows if it fails.
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &slurm{nodes: n, dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	for _, d := range []string{"munge", "state", "spool/" + n.name[0], "spool/" + n.name[1]} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	// munged refuses a key that others can read, and a key directory that
	// others can write.
	require.NoError(t, os.Chmod(filepath.Join(dir, "munge"), 0o700))
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "munge", "munge.key"), key, 0o400))
	conf := strings.NewReplacer("{{dir}}", dir, "{{node0}}", n.name[0], "{{node1}}", n.name[1],
		"{{addr0}}", n.addr[0], "{{addr1}}", n.addr[1]).Replace(slurmConf)
	require.NoError(t, os.WriteFile(s.conf, []byte(conf), 0o644))
	// Debian's slurmd always loads a cgroup plugin, and autodetection fails
	// on a host whose /sys/fs/cgroup is a tmpfs without systemd's hierarchy
	// (or finds cgroup v2 and wants systemd's delegation). cgroup/v1 over an
	// empty tmpfs in slurmd's own mount namespace (see nodes.enter) loads on
	// any host and, with proctrack/linuxproc and task/none, is never used.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.conf"), []byte("CgroupPlugin=cgroup/v1\n"), 0o644))

	// One munged serves both nodes: its socket is a file, which every
	// network namespace reaches, and a real cluster shares one key anyway.
	m := filepath.Join(dir, "munge")
	s.daemon(t, exec.Command("munged", "--foreground", "--force", "--socket="+m+"/munge.socket",
		"--key-file="+m+"/munge.key", "--pid-file="+m+"/munged.pid", "--log-file="+m+"/munged.log",
		"--seed-file="+m+"/munged.seed"))
	waitFile(t, m+"/munge.socket", 10*time.Second)
	s.daemon(t, s.nodeCmd(0, false, "slurmctld", "-D", "-f", s.conf))
	for i := range 2 {
		// -N: the node's name in slurm.conf, whatever the host name.
		s.daemon(t, s.nodeCmd(i, true, "slurmd", "-D", "-N", n.name[i], "-f", s.conf))
	}
	s.waitIdle(t)
	return s
}

// waitIdle waits until both nodes are idle: registered, or done with the
// previous job (a job submitted while one is still completing waits for the
// scheduler's next pass).
func (s *slurm) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _ := s.client(0, "sinfo", "--noheader", "--Node", "--format=%N %t").CombinedOutput()
		if strings.Count(string(out), "idle") == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster: the Slurm nodes did not become idle within 60 s; sinfo:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeCmd runs a daemon on node i (with its own cgroup mount, see
// startSlurm, when cgroupFS).
func (s *slurm) nodeCmd(i int, cgroupFS bool, name string, args ...string) *exec.Cmd {
	argv := append(append(s.enter(i, cgroupFS), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = jobEnv("SLURM_CONF=" + s.conf)
	return cmd
}

// client runs a Slurm command on node0, the login node.
func (s *slurm) client(node int, name string, args ...string) *exec.Cmd {
	return s.command(node, jobEnv("SLURM_CONF="+s.conf), name, args...)
}

// daemon starts cmd in the foreground and stops it when the test ends.
func (s *slurm) daemon(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	out := &buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s:\n%s", strings.Join(cmd.Args, " "), tailLines(out.String(), 30))
		}
	})
}

func waitFile(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster: %s did not appear within %v", path, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sbatchScript is the batch script docs/launcher.md shows: one task per
// node, and that task's ddprun starts the node's 2 workers. Single quotes:
// each task expands its own SLURM_NODEID.
const sbatchScript = `#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
srun --kill-on-bad-exit=1 bash -c 'exec ddprun \
    --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" \
    --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" \
    --nproc-per-node 2 --rdzv-id "$SLURM_JOB_ID" \
    mlp -epochs {{epochs}}'
rc=$?
echo "srun exit status $rc"
exit $rc
`

func TestSlurm(t *testing.T) {
	s := startSlurm(t)
	want := referenceLosses(t)
	mlp := filepath.Join(binDir, "mlp")

	t.Run("srun starts the ranks", func(t *testing.T) {
		s.waitIdle(t)
		r := run(t, s.client(0, "srun", "--nodes", "2", "--ntasks-per-node", "2", "--kill-on-bad-exit=1",
			"mlp", "-epochs", epochs), 3*time.Minute)
		require.Equal(t, 0, r.code, "srun:\n%s\n%s", r.stdout, r.stderr)
		assert.Equal(t, want, losses(r.stdout), "the same losses as ddprun --nproc-per-node 4")
		// 2 ranks on each of 2 hosts: auto picks the two-level all-reduce.
		assert.Contains(t, r.stdout, "world=4 backend=hier", "4 ranks over 2 nodes")
		t.Logf("srun --nodes 2 --ntasks-per-node 2 mlp -epochs %s: %v", epochs, r.took.Round(time.Millisecond))
		requireNoTasks(t, mlp, 10*time.Second)
	})

	t.Run("sbatch runs srun ddprun", func(t *testing.T) {
		s.waitIdle(t)
		script := filepath.Join(s.dir, "train.sbatch")
		require.NoError(t, os.WriteFile(script, []byte(strings.Replace(sbatchScript, "{{epochs}}", epochs, 1)), 0o755))
		out := filepath.Join(s.dir, "sbatch-%j.out")
		// --wait: sbatch returns when the job ends, with its exit code.
		r := run(t, s.client(0, "sbatch", "--wait", "--output", out, script), 3*time.Minute)
		m := regexp.MustCompile(`Submitted batch job (\d+)`).FindStringSubmatch(r.stdout)
		require.NotNil(t, m, "sbatch:\n%s\n%s", r.stdout, r.stderr)
		b, err := os.ReadFile(strings.Replace(out, "%j", m[1], 1))
		require.NoError(t, err)
		require.Equal(t, 0, r.code, "sbatch:\n%s\n%s\njob output:\n%s", r.stdout, r.stderr, b)
		assert.Equal(t, want, losses(string(b)), "the same losses as ddprun --nproc-per-node 4")
		assert.Contains(t, string(b), "world=4")
		assert.Contains(t, string(b), "hosting the rendezvous store on "+s.addr[0]+":29500",
			"node0's ddprun hosts the store at the first host of the job")
		t.Logf("sbatch (srun ddprun --nnodes 2 --nproc-per-node 2 mlp -epochs %s): %v", epochs, r.took.Round(time.Millisecond))
		requireNoTasks(t, mlp, 10*time.Second)
	})

	t.Run("a killed task fails the job naming its rank", func(t *testing.T) {
		s.waitIdle(t)
		cmd := s.client(0, "srun", "--nodes", "2", "--ntasks-per-node", "2", "--kill-on-bad-exit=1",
			"mlp", "-epochs", "100")
		progress := &buffer{}
		cmd.Stdout = progress
		done := make(chan result, 1)
		go func() { done <- run(t, cmd, 3*time.Minute) }()
		killed := killRank(t, mlp, "SLURM_PROCID", "3", progress.String) // on node1
		r := <-done
		assert.NotEqual(t, 0, r.code)
		assert.Less(t, time.Since(killed), 60*time.Second)
		assert.Regexp(t, `srun: error: node1: task 3: Killed`, r.stderr, "srun names the killed rank")
		t.Logf("job ended %v after the kill (exit %d)", time.Since(killed).Round(time.Millisecond), r.code)
		requireNoTasks(t, mlp, 10*time.Second)
	})

	t.Run("without --kill-on-bad-exit the survivors name the killed rank", func(t *testing.T) {
		s.waitIdle(t)
		cmd := s.client(0, "srun", "--nodes", "2", "--ntasks-per-node", "2", "mlp", "-epochs", "100")
		// On tcp every survivor holds a connection to rank 3 and names it;
		// under hier (auto's choice here) a survivor names the peer of the
		// step that failed, which may be its node's shm group.
		cmd.Env = append(cmd.Env, "GODDP_BACKEND=tcp")
		progress := &buffer{}
		cmd.Stdout = progress
		done := make(chan result, 1)
		go func() { done <- run(t, cmd, 3*time.Minute) }()
		killed := killRank(t, mlp, "SLURM_PROCID", "3", progress.String)
		r := <-done
		assert.NotEqual(t, 0, r.code)
		assert.Contains(t, r.stderr, "srun: error: node1: task 3: Killed")
		for rank := range 3 {
			// goddp's own error on each survivor, not only Slurm's line.
			// A survivor reading from rank 3 sees the connection closed; one
			// writing to it (the kill may land in the start-up broadcast)
			// sees it reset or a broken pipe: each names rank 3.
			assert.Regexp(t, fmt.Sprintf(`mlp: .*on rank %d: .*rank 3: [a-z ]+(\([A-Z]+\))?: the peer process exited or was killed`, rank), r.stderr,
				"rank %d names the killed rank", rank)
		}
		assert.Less(t, time.Since(killed), 60*time.Second)
		requireNoTasks(t, mlp, 10*time.Second)
	})

	t.Run("a killed worker under sbatch fails the job naming its rank", func(t *testing.T) {
		s.waitIdle(t)
		script := filepath.Join(s.dir, "long.sbatch")
		require.NoError(t, os.WriteFile(script, []byte(strings.Replace(sbatchScript, "{{epochs}}", "100", 1)), 0o755))
		out := filepath.Join(s.dir, "long-%j.out")
		done := make(chan result, 1)
		cmd := s.client(0, "sbatch", "--wait", "--output", out, script)
		submitted := &buffer{}
		cmd.Stdout = submitted
		go func() { done <- run(t, cmd, 3*time.Minute) }()
		output := func() string {
			m := regexp.MustCompile(`Submitted batch job (\d+)`).FindStringSubmatch(submitted.String())
			if m == nil {
				return ""
			}
			b, _ := os.ReadFile(strings.Replace(out, "%j", m[1], 1))
			return string(b)
		}
		killed := killRank(t, mlp, "RANK", "3", output)
		r := <-done
		b := output()
		require.NotEmpty(t, b, "sbatch:\n%s\n%s", r.stdout, r.stderr)
		// The job's own record of srun's status: sbatch --wait can report 0
		// for a failed job whose record slurmctld purged (MinJobAge) before
		// its last poll.
		assert.Regexp(t, `srun exit status [1-9]`, b)
		t.Logf("sbatch --wait exited %d", r.code)
		// node1's ddprun reports the root cause. node0's does too when it
		// learns it through the store before srun's --kill-on-bad-exit
		// stops it, which a loaded machine does not always allow.
		assert.Contains(t, b, "ddprun: error: launch: worker failed: rank 3 (local rank 1 on node1) failed with signal SIGKILL")
		assert.Contains(t, b, "rank       : 3 (local rank 1, node 1, host node1)")
		assert.Less(t, time.Since(killed), 60*time.Second)
		requireNoTasks(t, mlp, 10*time.Second)
	})
}

// killRank SIGKILLs the process of bin whose environment has key=rank once
// the job's output shows that the ranks are training (an epoch started),
// and returns when it did.
func killRank(t *testing.T, bin, key, rank string, output func() string) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(output(), "] Epoch 0 |") {
		require.True(t, time.Now().Before(deadline), "the job did not start training within 60 s:\n%s", output())
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range tasks(bin) {
		if v, _ := environ(pid, key); v == rank {
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			return time.Now()
		}
	}
	t.Fatalf("no process of %s has %s=%s", bin, key, rank)
	return time.Time{}
}
