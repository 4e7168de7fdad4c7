package docscheck

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The guide's commands run on the simulated GPU. These are the only
// changes made to them: a GPU becomes sim, the GPU count 2, the host node0
// loopback with a free port, bin/ the test's directory, and the training
// is cut to a few steps.
const (
	guidePath    = "docs/gpu-training.md"
	tinyTraining = "-epochs 1 -max-steps 5"
	// commandLimit bounds each command; a hang fails the test. Every
	// collective also times out (GODDP_TIMEOUT below).
	commandLimit = 3 * time.Minute
)

// guideCommands returns the lines of the guide's ```sh blocks, comments
// and blank lines dropped, with the line number of each.
func guideCommands(t *testing.T, path string) (lines []string, numbers []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", guidePath, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "```sh":
			in = true
		case in && line == "```":
			in = false
		case in && line != "" && !strings.HasPrefix(line, "#"):
			lines = append(lines, line)
			numbers = append(numbers, n)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, numbers
}

// guideRun is the state the guide's commands share: the binaries built,
// the variables exported, nodes waiting for the rest of their job.
type guideRun struct {
	t       *testing.T
	root    string
	bin     string
	env     []string
	pending map[string][]nodeCmd // a multi-node job's lines, by the line without its node rank
	ports   map[string]string    // node0:PORT → 127.0.0.1:free port, one per job
	ran     map[string]int       // what kind of command ran, for the coverage check
}

type nodeCmd struct {
	line int
	argv []string
}

func TestGPUTrainingGuideCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and trains examples/mlp on the simulated GPU")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	root := repoRoot(t)
	lines, numbers := guideCommands(t, filepath.Join(root, guidePath))
	r := &guideRun{t: t, root: root, bin: t.TempDir(), env: cleanEnv(),
		pending: map[string][]nodeCmd{}, ports: map[string]string{}, ran: map[string]int{}}
	for i, line := range lines {
		r.run(numbers[i], line)
	}
	for key, nodes := range r.pending {
		t.Errorf("%s:%d: a job of %d nodes whose other node commands are missing: %s", guidePath, nodes[0].line, len(nodes), key)
	}
	// The guide must keep teaching each way of running: removing one
	// fails here rather than leaving it unchecked.
	for _, kind := range []string{"build", "one GPU", "ddprun one machine", "ddprun several machines", "torchrun one machine", "torchrun several machines", "srun", "export"} {
		if r.ran[kind] == 0 {
			t.Errorf("%s has no %s command (the guide shows one for each way of running)", guidePath, kind)
		}
	}
}

// cleanEnv is this process's environment without any launcher's
// variables, so that a command is a rank only where it makes one.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "SLURM_"), strings.HasPrefix(k, "OMPI_"), strings.HasPrefix(k, "PMI_"),
			strings.HasPrefix(k, "TORCHELASTIC_"), strings.HasPrefix(k, "GODDP_"),
			k == "RANK", k == "WORLD_SIZE", k == "LOCAL_RANK", k == "LOCAL_WORLD_SIZE", k == "GROUP_RANK",
			k == "MASTER_ADDR", k == "MASTER_PORT", k == "CUDA_VISIBLE_DEVICES":
			continue
		}
		env = append(env, kv)
	}
	// One thread per rank on the shared cores, and every collective bounded.
	return append(env, "GODDP_NUM_THREADS=1", "GODDP_TIMEOUT=60s")
}

func (r *guideRun) run(n int, line string) {
	t := r.t
	argv := strings.Fields(line)
	where := fmt.Sprintf("%s:%d", guidePath, n)
	switch {
	case argv[0] == "export":
		r.export(where, line)
	case len(argv) > 2 && argv[0] == "go" && argv[1] == "build":
		r.build(where, argv)
	case argv[0] == "bin/gpuinfo":
		// Its documented exits: 0 all usable, 3 no GPU, 4 a library missing.
		code, out := r.exec(where, r.subst(argv), nil)
		if code != 0 && code != 3 && code != 4 {
			t.Errorf("%s: %s exited %d, not one of the codes the guide gives (0, 3, 4):\n%s", where, line, code, out)
		}
	case strings.HasPrefix(argv[0], "bin/") && argv[0] != "bin/ddprun":
		r.ran["one GPU"]++
		r.expectTraining(where, line, r.subst(argv), nil)
	case argv[0] == "bin/ddprun" || argv[0] == "torchrun":
		launcher := "ddprun"
		if argv[0] == "torchrun" {
			launcher = "torchrun"
			if !r.haveTorchrun() {
				r.ran[launcher+" one machine"]++ // counted: the guide has it; e2e/torchrun_test.go covers torchrun where torch is installed
				if hasFlag(argv, "--nnodes") {
					r.ran[launcher+" several machines"]++
				}
				t.Logf("%s: skipped, /usr/bin/python3 has no torch.distributed.run: %s", where, line)
				return
			}
		}
		nodes, rank := nodeFlags(argv)
		if nodes <= 1 {
			r.ran[launcher+" one machine"]++
			r.expectTraining(where, line, r.subst(argv), nil)
			return
		}
		r.ran[launcher+" several machines"]++
		if rank < 0 {
			// The same command on every node (torchrun's c10d rendezvous
			// numbers the nodes itself).
			job := make([]nodeCmd, nodes)
			sub := r.subst(argv)
			for i := range job {
				job[i] = nodeCmd{n, sub}
			}
			r.runNodes(where, line, job)
			return
		}
		key := strings.Replace(line, "--node-rank "+strconv.Itoa(rank), "--node-rank R", 1)
		r.pending[key] = append(r.pending[key], nodeCmd{n, r.subst(argv)})
		if len(r.pending[key]) == nodes {
			r.runNodes(where, line, r.pending[key])
			delete(r.pending, key)
		}
	case argv[0] == "srun":
		r.ran["srun"]++
		r.srun(where, line, argv)
	default:
		t.Errorf("%s: the test does not know how to check %q: every line of a ```sh block must be a command it runs", where, line)
	}
}

// export sets a variable for the later commands; a $(...) value is a
// fresh random token, as the guide's command makes one.
func (r *guideRun) export(where, line string) {
	name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
	if !ok {
		r.t.Errorf("%s: cannot read %q", where, line)
		return
	}
	if strings.HasPrefix(value, "$(") {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		value = hex.EncodeToString(b)
	}
	r.env = append(r.env, name+"="+value)
	r.ran["export"]++
}

func (r *guideRun) build(where string, argv []string) {
	args := append([]string(nil), argv[1:]...)
	for i := range args {
		if strings.HasPrefix(args[i], "bin/") {
			args[i] = filepath.Join(r.bin, strings.TrimPrefix(args[i], "bin/"))
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = r.root
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("%s: %s: %v\n%s", where, strings.Join(argv, " "), err, out)
	}
	r.ran["build"]++
}

// subst makes a guide command runnable here (see the constants above).
func (r *guideRun) subst(argv []string) []string {
	out := make([]string, 0, len(argv)+4)
	trains := false // the command runs a training program, not only ddprun or gpuinfo
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case strings.HasPrefix(a, "bin/"):
			name := strings.TrimPrefix(a, "bin/")
			trains = trains || (name != "ddprun" && name != "gpuinfo")
			a = filepath.Join(r.bin, name)
		case a == "cuda" && i > 0 && argv[i-1] == "-device":
			a = "sim"
		case a == "gpu" && i > 0 && (argv[i-1] == "--nproc-per-node" || argv[i-1] == "--nproc_per_node"):
			a = "2"
		case strings.HasPrefix(a, "node0:"):
			if _, ok := r.ports[a]; !ok {
				r.ports[a] = "127.0.0.1:" + freePort(r.t)
			}
			a = r.ports[a]
		}
		out = append(out, a)
	}
	if trains {
		out = append(out, strings.Fields(tinyTraining)...)
	}
	return out
}

// exec runs argv (torchrun through the e2e tests' wrapper for Debian's
// torch under Python 3.11) and returns its exit code and output.
func (r *guideRun) exec(where string, argv []string, extraEnv []string) (int, string) {
	r.t.Helper()
	if argv[0] == "torchrun" {
		argv = append([]string{"/usr/bin/python3", filepath.Join(r.root, "e2e/testdata/torchrun/torchrun.py")}, argv[1:]...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = r.t.TempDir()
	cmd.Env = append(append([]string(nil), r.env...), extraEnv...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		r.t.Errorf("%s: %s did not end within %v:\n%s", where, strings.Join(argv, " "), commandLimit, out)
		return -1, string(out)
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		r.t.Errorf("%s: %s: %v", where, strings.Join(argv, " "), err)
		return -1, string(out)
	}
	return 0, string(out)
}

// expectTraining runs a training command and checks that it trained on
// the simulated GPU to the end: exit 0 and rank 0's samples_per_s line.
func (r *guideRun) expectTraining(where, line string, argv, extraEnv []string) {
	code, out := r.exec(where, argv, extraEnv)
	if code != 0 || !strings.Contains(out, "samples_per_s=") || !strings.Contains(out, "[sim:") {
		r.t.Errorf("%s: %s (run as %s) exited %d without training to the end on sim:\n%s", where, line, strings.Join(argv, " "), code, out)
	}
}

// runNodes runs a multi-node job's commands at once, as its nodes would.
func (r *guideRun) runNodes(where, line string, nodes []nodeCmd) {
	type result struct {
		code int
		out  string
	}
	res := make([]result, len(nodes))
	var wg sync.WaitGroup
	for i, nc := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].code, res[i].out = r.exec(fmt.Sprintf("%s:%d", guidePath, nc.line), nc.argv, nil)
		}()
	}
	wg.Wait()
	all := ""
	for i, x := range res {
		if x.code != 0 {
			r.t.Errorf("%s:%d: node %d of %s exited %d:\n%s", guidePath, nodes[i].line, i, line, x.code, x.out)
		}
		all += x.out
	}
	if !strings.Contains(all, "samples_per_s=") {
		r.t.Errorf("%s: the job of %s printed no samples_per_s:\n%s", where, line, all)
	}
}

// srun runs the program part of an srun command as srun would start it:
// one process per task, each with the Slurm variables goddp reads. The
// guide's --ntasks-per-node (a GPU each) becomes one task per node.
func (r *guideRun) srun(where, line string, argv []string) {
	nodes := 0
	i := 1
	for ; i < len(argv) && strings.HasPrefix(argv[i], "-"); i++ {
		name, val, hasVal := strings.Cut(argv[i], "=")
		if !hasVal && !strings.HasPrefix(argv[i], "--kill-on-bad-exit") && i+1 < len(argv) {
			i++
			val = argv[i]
		}
		if name == "--nodes" || name == "-N" {
			nodes, _ = strconv.Atoi(val)
		}
	}
	if nodes < 1 || i >= len(argv) {
		r.t.Errorf("%s: cannot read the node count and program of %q", where, line)
		return
	}
	prog := r.subst(argv[i:])
	port := freePort(r.t)
	var wg sync.WaitGroup
	codes := make([]int, nodes)
	outs := make([]string, nodes)
	for rank := 0; rank < nodes; rank++ {
		env := []string{"SLURM_JOB_ID=" + port, "SLURM_PROCID=" + strconv.Itoa(rank), "SLURM_NTASKS=" + strconv.Itoa(nodes),
			"SLURM_LOCALID=0", "SLURM_NTASKS_PER_NODE=1", "SLURM_NODEID=" + strconv.Itoa(rank),
			"SLURM_NODELIST=localhost", "MASTER_PORT=" + port}
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[rank], outs[rank] = r.exec(where, prog, env)
		}()
	}
	wg.Wait()
	for rank := range codes {
		if codes[rank] != 0 {
			r.t.Errorf("%s: task %d of %s exited %d:\n%s", where, rank, line, codes[rank], outs[rank])
		}
	}
	if !strings.Contains(outs[0], "samples_per_s=") {
		r.t.Errorf("%s: rank 0 of %s printed no samples_per_s:\n%s", where, line, outs[0])
	}
}

var torchrunOnce struct {
	sync.Once
	ok bool
}

func (r *guideRun) haveTorchrun() bool {
	torchrunOnce.Do(func() {
		torchrunOnce.ok = exec.Command("/usr/bin/python3", "-c", "import torch.distributed.run").Run() == nil
	})
	return torchrunOnce.ok
}

// nodeFlags reads --nnodes and --node-rank (-1 when the command does not
// give it: the same command runs on every node).
func nodeFlags(argv []string) (nodes, rank int) {
	nodes, rank = 1, -1
	for i := 0; i+1 < len(argv); i++ {
		switch argv[i] {
		case "--nnodes":
			nodes, _ = strconv.Atoi(argv[i+1])
		case "--node-rank", "--node_rank":
			rank, _ = strconv.Atoi(argv[i+1])
		}
	}
	return nodes, rank
}

func hasFlag(argv []string, flag string) bool {
	for _, a := range argv {
		if a == flag {
			return true
		}
	}
	return false
}

// freePort is a port nothing listens on now, for a rendezvous endpoint.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
