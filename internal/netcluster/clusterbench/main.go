// Command clusterbench measures all-reduce bus bandwidth on a simulated
// cluster (package netcluster): for each goddp backend it starts ddprun on
// every node running `ddpbench allreduce`, and, given -mpi, the same sizes
// with OpenMPI's MPI_Allreduce under mpirun across the same namespaces.
// scripts/cluster_bench.sh builds the binaries and runs it; it needs root.
//
//	clusterbench -bindir DIR [-mpi BIN] [-rate 1gbit] [-delay 50us] [-backends hier,tcp]
//
// busbw follows nccl-tests (algbw x 2(n-1)/n), so it compares with the rate
// of one node's link whatever the number of ranks.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goddp/goddp/internal/bytesize"
	"github.com/goddp/goddp/internal/netcluster"
)

type row struct {
	bytes       int64
	timeUS      float64
	busbwGBps   float64
	backend     string
	ranks, iter int
}

func main() {
	nodes := flag.Int("nodes", 4, "nodes (namespaces)")
	nproc := flag.Int("nproc", 2, "ranks per node")
	rate := flag.String("rate", "1gbit", "each node's link rate (tc syntax)")
	delay := flag.Duration("delay", 50*time.Microsecond, "each node's link delay (netem; skipped where the kernel lacks it)")
	backends := flag.String("backends", "hier,tcp", "goddp backends, comma-separated")
	minS := flag.String("min", "1M", "smallest size")
	maxS := flag.String("max", "64M", "largest size")
	iters := flag.Int("iters", 5, "timed iterations per size")
	bindir := flag.String("bindir", "", "directory holding ddprun and ddpbench")
	mpi := flag.String("mpi", "", "the MPI_Allreduce probe built from scripts/mpi_allreduce.c (empty: no OpenMPI row)")
	timeout := flag.Duration("timeout", 8*time.Minute, "limit per job")
	flag.Parse()
	if *bindir == "" {
		fmt.Fprintln(os.Stderr, "clusterbench: -bindir is required")
		os.Exit(2)
	}
	c, err := netcluster.New(netcluster.Config{Nodes: *nodes, Rate: *rate, Delay: *delay})
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Printf("# %d nodes x %d ranks; %s\n", *nodes, *nproc, c.Shaping)
	if c.DelayErr != nil {
		fmt.Printf("# delay %v not applied: %v\n", *delay, c.DelayErr)
	}
	linkGbit, _ := gbit(*rate)
	all := map[string][]row{}
	var order []string
	for i, b := range strings.Split(*backends, ",") {
		rows, err := runGoddp(c, *bindir, b, *nproc, 29500+i, *minS, *maxS, *iters, *timeout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "clusterbench: backend %s: %v\n", b, err)
			os.Exit(1)
		}
		all[b], order = rows, append(order, b)
	}
	if *mpi != "" {
		rows, err := runMPI(c, *mpi, *nproc, *minS, *maxS, *iters, *timeout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "clusterbench: openmpi: %v\n", err)
			os.Exit(1)
		}
		all["openmpi"], order = rows, append(order, "openmpi")
	}
	fmt.Printf("# %-8s %10s %10s %12s %12s %8s\n", "backend", "bytes", "time_ms", "busbw_GB/s", "busbw_Gbit/s", "of_link")
	for _, b := range order {
		for _, r := range all[b] {
			g := r.busbwGBps * 8
			fmt.Printf("  %-8s %10d %10.1f %12.3f %12.3f %7.0f%%\n", b, r.bytes, r.timeUS/1e3, r.busbwGBps, g, 100*g/linkGbit)
		}
	}
	// The bars of issue 30, at the largest size.
	at := func(b string) float64 {
		if rs := all[b]; len(rs) > 0 {
			return rs[len(rs)-1].busbwGBps * 8
		}
		return 0
	}
	if h := at("hier"); h > 0 {
		fmt.Printf("# largest size: hier %.3f Gbit/s = %.0f%% of the link", h, 100*h/linkGbit)
		if t := at("tcp"); t > 0 {
			fmt.Printf(", %.2fx tcp", h/t)
		}
		if m := at("openmpi"); m > 0 {
			fmt.Printf(", %.2fx openmpi", h/m)
		}
		fmt.Println()
	}
}

// gbit reads a tc rate as Gbit/s.
func gbit(rate string) (float64, error) {
	r := strings.ToLower(rate)
	for _, u := range []struct {
		s string
		m float64
	}{{"gbit", 1}, {"mbit", 1e-3}, {"kbit", 1e-6}} {
		if v, ok := strings.CutSuffix(r, u.s); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f * u.m, err
		}
	}
	return 0, fmt.Errorf("rate %q", rate)
}

// env is a clean environment for the jobs: no launcher or goddp variable
// of the caller's but the backends' tuning (GODDP_HIER_*, GODDP_TCP_*,
// GODDP_SHM_*), one BLAS thread, the token comm needs beyond loopback.
func env() []string {
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		tuning := strings.HasPrefix(k, "GODDP_HIER_") || strings.HasPrefix(k, "GODDP_TCP_") || strings.HasPrefix(k, "GODDP_SHM_")
		if strings.HasPrefix(k, "GODDP_") && !tuning || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMI") ||
			k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "LOCAL_WORLD_SIZE" || k == "MASTER_ADDR" || k == "MASTER_PORT" {
			continue
		}
		e = append(e, kv)
	}
	return append(e, "GODDP_NUM_THREADS=1", "GODDP_TOKEN=clusterbench-"+strconv.Itoa(os.Getpid()))
}

func runGoddp(c *netcluster.Cluster, bindir, backend string, nproc, port int, minS, maxS string, iters int, limit time.Duration) ([]row, error) {
	var cmds []*exec.Cmd
	outs := make([]*strings.Builder, len(c.Nodes))
	for i := range c.Nodes {
		cmd := c.Command(i, env(), filepath.Join(bindir, "ddprun"),
			"--nnodes", strconv.Itoa(len(c.Nodes)), "--node-rank", strconv.Itoa(i),
			"--master-addr", c.Nodes[0].Name, "--master-port", strconv.Itoa(port),
			"--nproc-per-node", strconv.Itoa(nproc),
			filepath.Join(bindir, "ddpbench"), "allreduce", "-backend", backend, "-min", minS, "-max", maxS,
			"-iters", strconv.Itoa(iters), "-warmup", "1", "-format", "csv", "-bind", "none")
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		cmds = append(cmds, cmd)
	}
	if err := runAll(cmds, limit); err != nil {
		var b strings.Builder
		for i, o := range outs {
			fmt.Fprintf(&b, "\n--- node%d:\n%s", i, o.String())
		}
		return nil, fmt.Errorf("%v%s", err, b.String())
	}
	return parseCSV(outs[0].String())
}

// runAll starts every command and waits for all of them, killing their
// process groups past limit or when one fails.
func runAll(cmds []*exec.Cmd, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	errs := make(chan error, len(cmds))
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { errs <- cmd.Wait() }()
	}
	var first error
	for range cmds {
		select {
		case err := <-errs:
			if err != nil && first == nil {
				first = err
				killAll(cmds)
			}
		case <-ctx.Done():
			killAll(cmds)
			first = fmt.Errorf("still running after %v", limit)
			<-errs
		}
	}
	return first
}

// killAll kills the process groups the commands lead (Setpgid: they are ours).
func killAll(cmds []*exec.Cmd) {
	for _, cmd := range cmds {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// parseCSV reads ddpbench's (and the MPI probe's) CSV rows from output that
// may carry other lines.
func parseCSV(out string) ([]row, error) {
	var rows []row
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.LastIndex(line, "]:"); i >= 0 {
			line = strings.TrimSpace(line[i+2:])
		}
		f := strings.Split(line, ",")
		if len(f) < 11 {
			continue
		}
		b, err1 := strconv.ParseInt(f[0], 10, 64)
		t, err2 := strconv.ParseFloat(f[3], 64)
		bus, err3 := strconv.ParseFloat(f[5], 64)
		it, _ := strconv.Atoi(f[6])
		n, _ := strconv.Atoi(f[9])
		if err := errors.Join(err1, err2, err3); err != nil {
			continue
		}
		rows = append(rows, row{bytes: b, timeUS: t, busbwGBps: bus, backend: f[8], ranks: n, iter: it})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no results in the output:\n%s", out)
	}
	return rows, nil
}

// rshAgent is what mpirun runs instead of ssh to start orted on a node:
// entering the node's namespace under its host name.
const rshAgent = `#!/bin/sh
host=$1; shift
case $host in
{{cases}}*) echo "rsh-agent: no node $host" >&2; exit 255;;
esac
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
`

func runMPI(c *netcluster.Cluster, bin string, nproc int, minS, maxS string, iters int, limit time.Duration) ([]row, error) {
	dir, err := os.MkdirTemp("", "clusterbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var cases, hosts strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&cases, "%s) ns=%s;;\n", n.Name, n.NS)
		fmt.Fprintf(&hosts, "%s slots=%d\n", n.Name, nproc)
	}
	agent := filepath.Join(dir, "rsh-agent")
	if err := os.WriteFile(agent, []byte(strings.Replace(rshAgent, "{{cases}}", cases.String(), 1)), 0o755); err != nil {
		return nil, err
	}
	hostfile := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(hostfile, []byte(hosts.String()), 0o644); err != nil {
		return nil, err
	}
	minB, err := bytesize.Parse(minS)
	if err != nil {
		return nil, err
	}
	maxB, err := bytesize.Parse(maxS)
	if err != nil {
		return nil, err
	}
	// OpenMPI's own transports: TCP between the nodes, shared memory
	// within one (without CMA, which namespaces may forbid).
	args := []string{"--allow-run-as-root", "--hostfile", hostfile, "-np", strconv.Itoa(nproc * len(c.Nodes)),
		"--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", c.Subnet,
		"--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", c.Subnet,
		"--mca", "btl_vader_single_copy_mechanism", "none", "--bind-to", "none",
		// The ranks outnumber the cores: without this OpenMPI's ranks spin
		// while they wait and starve each other (and the kernel's network
		// work), which is no measure of its algorithms. goddp's backends
		// stop spinning by themselves when the ranks outnumber the cores.
		"--mca", "mpi_yield_when_idle", "1",
		bin, strconv.FormatInt(minB, 10), strconv.FormatInt(maxB, 10), strconv.Itoa(iters)}
	cmd := c.Command(0, env(), "mpirun", args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := runAll([]*exec.Cmd{cmd}, limit); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, out.String())
	}
	return parseCSV(out.String())
}
