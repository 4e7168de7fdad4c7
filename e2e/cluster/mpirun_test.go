package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rshAgent is what OpenMPI runs instead of ssh to start its daemon (orted)
// on another node: `AGENT HOST COMMAND...`, where COMMAND is shell text for
// the remote login shell. Here logging in to a node is entering its
// namespace under its host name.
const rshAgent = `#!/bin/sh
host=$1; shift
echo "$host" >>"$0.log"
case $host in
{{cases}}*) echo "rsh-agent: no node $host" >&2; exit 255;;
esac
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
`

// requireMPI installs OpenMPI when mpirun is missing (scripts/setup-test.sh
// installs the same), or skips saying why.
func requireMPI(t *testing.T) {
	t.Helper()
	requireRoot(t)
	requireCommands(t, []string{"mpirun"}, []string{"openmpi-bin", "libopenmpi-dev"})
}

// mpirunArgs are the flags every mpirun here takes: 2 slots per node from
// the hostfile, the agent, and OpenMPI's own traffic on the nodes' link.
func mpirunArgs(agent, hostfile string) []string {
	return []string{"--allow-run-as-root", "--hostfile", hostfile, "-np", "4",
		"--mca", "plm_rsh_agent", agent,
		"--mca", "oob_tcp_if_include", "10.97.0.0/24",
		"--bind-to", "none"}
}

func TestMpirun(t *testing.T) {
	requireMPI(t)
	n := newNodes(t)
	want := referenceLosses(t)
	dir := t.TempDir()
	var cases strings.Builder
	for i := range 2 {
		fmt.Fprintf(&cases, "%s) ns=%s;;\n", n.name[i], n.ns[i])
	}
	agent := filepath.Join(dir, "rsh-agent")
	require.NoError(t, os.WriteFile(agent, []byte(strings.Replace(rshAgent, "{{cases}}", cases.String(), 1)), 0o755))
	hostfile := filepath.Join(dir, "hostfile")
	require.NoError(t, os.WriteFile(hostfile, []byte(n.name[0]+" slots=2\n"+n.name[1]+" slots=2\n"), 0o644))
	mlp := filepath.Join(binDir, "mlp")

	t.Run("tcp backend from OMPI_*", func(t *testing.T) {
		// -x: mpirun passes only these variables on to the ranks on node1.
		args := append(mpirunArgs(agent, hostfile),
			"-x", "PATH", "-x", "GODDP_TOKEN", "-x", "GODDP_NUM_THREADS",
			"-x", "MASTER_ADDR=node0", "-x", "MASTER_PORT=29500", "-x", "GODDP_BACKEND=tcp",
			"mlp", "-epochs", epochs)
		r := run(t, n.command(0, jobEnv(), "mpirun", args...), 3*time.Minute)
		require.Equal(t, 0, r.code, "mpirun:\n%s\n%s", r.stdout, r.stderr)
		assert.Equal(t, want, losses(r.stdout), "the same losses as ddprun --nproc-per-node 4")
		assert.Contains(t, r.stdout, "world=4 backend=tcp", "4 ranks over 2 nodes")
		t.Logf("mpirun -np 4 over 2 nodes, mlp -epochs %s: %v", epochs, r.took.Round(time.Millisecond))
		requireNoTasks(t, mlp, 10*time.Second)
		requireAgentStarted(t, agent, n.name[1])
	})

	t.Run("a killed rank fails the job naming it", func(t *testing.T) {
		args := append(mpirunArgs(agent, hostfile),
			"-x", "PATH", "-x", "GODDP_TOKEN", "-x", "GODDP_NUM_THREADS",
			"-x", "MASTER_ADDR=node0", "-x", "MASTER_PORT=29500",
			"mlp", "-epochs", "100")
		cmd := n.command(0, jobEnv(), "mpirun", args...)
		progress := &buffer{}
		cmd.Stdout = progress
		done := make(chan result, 1)
		go func() { done <- run(t, cmd, 3*time.Minute) }()
		killed := killRank(t, mlp, "OMPI_COMM_WORLD_RANK", "3", progress.String) // on node1
		r := <-done
		assert.NotEqual(t, 0, r.code)
		assert.Less(t, time.Since(killed), 60*time.Second)
		assert.Regexp(t, `(?s)process rank 3 with PID \d+ on node node1 exited on\s+signal 9 \(Killed\)`, r.stdout+r.stderr,
			"mpirun names the killed rank")
		requireNoTasks(t, mlp, 10*time.Second)
	})

	t.Run("mpi backend", func(t *testing.T) {
		mlpMPI := filepath.Join(dir, "mlp-mpi")
		if out, err := exec.Command("go", "build", "-tags", "mpi", "-o", mlpMPI, "../../examples/mlp").CombinedOutput(); err != nil {
			t.Skipf("cluster: the mpi build of examples/mlp failed (apt-get install libopenmpi-dev): %v\n%s", err, out)
		}
		// OpenMPI's own transports: TCP on the link between the nodes,
		// shared memory within one without the cross-process reads (CMA)
		// that namespaces and containers often forbid.
		args := append(mpirunArgs(agent, hostfile),
			"--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "10.97.0.0/24",
			"--mca", "btl_vader_single_copy_mechanism", "none",
			"-x", "PATH", "-x", "GODDP_TOKEN", "-x", "GODDP_NUM_THREADS",
			"-x", "GODDP_BACKEND=mpi", "-x", "MASTER_ADDR=node0", "-x", "MASTER_PORT=29500",
			mlpMPI, "-epochs", epochs)
		r := run(t, n.command(0, jobEnv(), "mpirun", args...), 3*time.Minute)
		require.Equal(t, 0, r.code, "mpirun:\n%s\n%s", r.stdout, r.stderr)
		assert.Equal(t, want, losses(r.stdout), "the same losses as ddprun --nproc-per-node 4")
		assert.Contains(t, r.stdout, "world=4 backend=mpi")
		t.Logf("mpirun -np 4 over 2 nodes, GODDP_BACKEND=mpi, mlp -epochs %s: %v", epochs, r.took.Round(time.Millisecond))
		requireNoTasks(t, mlpMPI, 10*time.Second)
	})
}

// requireAgentStarted checks that mpirun went through the agent to host:
// the ranks there ran on another node, not beside mpirun.
func requireAgentStarted(t *testing.T, agent, host string) {
	t.Helper()
	b, err := os.ReadFile(agent + ".log")
	require.NoError(t, err, "mpirun never ran the rsh agent")
	assert.Contains(t, strings.Fields(string(b)), host)
}
