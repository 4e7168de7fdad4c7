// Package netcluster builds a simulated cluster on one Linux host: each
// node is a network namespace entered under its own host name, the nodes
// are joined by a bridge that lives in a namespace of its own (the host's
// network is never touched), and every node's link is shaped with tc in
// both directions: a token bucket (tbf) for the rate and, where the kernel
// has sch_netem, netem for the delay.
//
// It needs root and iproute2 (ip, tc) and util-linux's unshare; New fails
// with an error wrapping ErrUnavailable, saying which is missing, and
// tests skip on it. Everything a cluster makes carries the creating
// process's pid in its name (gdsc<pid>_<seq>_<node>), so SweepStale, which
// New runs first, removes the namespaces of a test process that died
// before its clean-up; deleting a namespace removes its links, bridge and
// qdiscs with it.
package netcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrUnavailable is wrapped by New's error when this host cannot make a
// cluster (not root, or a command missing).
var ErrUnavailable = errors.New("netcluster: unavailable")

// Config describes the cluster.
type Config struct {
	// Nodes is the number of nodes (default 4).
	Nodes int
	// Rate is each node's link rate in tc's syntax ("1gbit", "10gbit");
	// "" leaves the links unshaped.
	Rate string
	// Delay is added to every packet a node sends and receives (netem);
	// zero adds none.
	Delay time.Duration
}

// Node is one simulated machine.
type Node struct {
	Name string // host name, resolvable on every node
	NS   string // network namespace
	Addr string // address on the cluster's network
}

// Cluster is a set of nodes; Close removes it.
type Cluster struct {
	Nodes  []Node
	Switch string // the namespace holding the bridge
	Subnet string // CIDR of the nodes' network
	// Shaping says what was applied to each link, in words.
	Shaping string
	// DelayErr is why Config.Delay could not be applied (nil when it was,
	// or when none was asked for): the links then have the rate only.
	DelayErr error
}

var seq atomic.Int32

const prefix = "gdsc"

// Available returns nil, or why no cluster can be made here.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root to make network namespaces and qdiscs", ErrUnavailable)
	}
	for _, c := range []string{"ip", "tc", "unshare"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%w: the %s command is not installed (iproute2, util-linux)", ErrUnavailable, c)
		}
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// New makes the cluster. On failure it removes whatever it made.
func New(cfg Config) (c *Cluster, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 4
	}
	if cfg.Nodes < 1 || cfg.Nodes > 200 {
		return nil, fmt.Errorf("netcluster: %d nodes, want 1..200", cfg.Nodes)
	}
	SweepStale()
	id := fmt.Sprintf("%s%d_%d_", prefix, os.Getpid(), seq.Add(1))
	c = &Cluster{Switch: id + "sw", Subnet: "10.96.0.0/24"}
	for i := range cfg.Nodes {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprintf("node%d", i), NS: id + strconv.Itoa(i), Addr: fmt.Sprintf("10.96.0.%d", i+1)})
	}
	defer func() {
		if err != nil {
			c.Close()
			c = nil
		}
	}()
	if err := run("ip", "netns", "add", c.Switch); err != nil {
		return c, fmt.Errorf("%w: cannot create a network namespace: %v", ErrUnavailable, err)
	}
	steps := [][]string{
		{"-n", c.Switch, "link", "add", "br0", "type", "bridge"},
		{"-n", c.Switch, "link", "set", "br0", "up"},
	}
	for i, n := range c.Nodes {
		port := "p" + strconv.Itoa(i)
		steps = append(steps,
			[]string{"netns", "add", n.NS},
			[]string{"link", "add", "name", "eth0", "netns", n.NS, "type", "veth", "peer", "name", port, "netns", c.Switch},
			[]string{"-n", c.Switch, "link", "set", port, "master", "br0"},
			[]string{"-n", c.Switch, "link", "set", port, "up"},
			[]string{"-n", n.NS, "addr", "add", n.Addr + "/24", "dev", "eth0"},
			[]string{"-n", n.NS, "link", "set", "eth0", "up"},
			[]string{"-n", n.NS, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return c, fmt.Errorf("netcluster: %v", err)
		}
	}
	if err := c.shape(cfg); err != nil {
		return c, err
	}
	// `ip netns exec NS` bind-mounts /etc/netns/NS/* over /etc: each node
	// resolves every node's name as a cluster's DNS would, and the host's
	// /etc/hosts is untouched.
	hosts := "127.0.0.1 localhost\n::1 localhost\n"
	for _, n := range c.Nodes {
		hosts += n.Addr + " " + n.Name + "\n"
	}
	for _, n := range c.Nodes {
		dir := filepath.Join("/etc/netns", n.NS)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return c, fmt.Errorf("netcluster: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
			return c, fmt.Errorf("netcluster: %v", err)
		}
	}
	return c, nil
}

// shape puts the rate (and delay) on both ends of each node's link: the
// node's eth0 (what it sends) and the bridge port (what it receives).
func (c *Cluster) shape(cfg Config) error {
	if cfg.Rate == "" && cfg.Delay == 0 {
		c.Shaping = "unshaped"
		return nil
	}
	bps, err := parseRate(cfg.Rate)
	if cfg.Rate != "" && err != nil {
		return fmt.Errorf("netcluster: rate %q: %v", cfg.Rate, err)
	}
	delay := ""
	if cfg.Delay > 0 {
		delay = strconv.FormatInt(cfg.Delay.Microseconds(), 10) + "us"
		// netem alone does both (its rate is exact per packet); probe it
		// on the first link.
		n := c.Nodes[0]
		args := []string{"-n", n.NS, "qdisc", "add", "dev", "eth0", "root", "netem", "delay", delay, "limit", "100000"}
		if cfg.Rate != "" {
			args = append(args, "rate", cfg.Rate)
		}
		if err := run("tc", args...); err != nil {
			c.DelayErr = fmt.Errorf("netem is not available in this kernel (sch_netem): links get the rate only, no delay: %v", err)
		} else {
			_ = run("tc", "-n", n.NS, "qdisc", "del", "dev", "eth0", "root")
		}
	}
	for i, n := range c.Nodes {
		for _, end := range [][2]string{{n.NS, "eth0"}, {c.Switch, "p" + strconv.Itoa(i)}} {
			var args []string
			switch {
			case delay != "" && c.DelayErr == nil:
				args = []string{"-n", end[0], "qdisc", "add", "dev", end[1], "root", "netem", "delay", delay, "limit", "100000"}
				if cfg.Rate != "" {
					args = append(args, "rate", cfg.Rate)
				}
			case cfg.Rate != "":
				// A bucket of 1 ms of traffic (at least 64 KiB, a GSO
				// packet), and up to 20 ms queued before drops.
				burst := max(bps/8/1000, 64<<10)
				args = []string{"-n", end[0], "qdisc", "add", "dev", end[1], "root", "tbf", "rate", cfg.Rate,
					"burst", strconv.FormatInt(burst, 10), "latency", "20ms"}
			default:
				continue
			}
			if err := run("tc", args...); err != nil {
				return fmt.Errorf("netcluster: %v", err)
			}
		}
	}
	switch {
	case delay != "" && c.DelayErr == nil:
		c.Shaping = fmt.Sprintf("netem rate %s delay %s on each end of every node's link", cfg.Rate, delay)
	default:
		c.Shaping = fmt.Sprintf("tbf rate %s on each end of every node's link", cfg.Rate)
		if c.DelayErr != nil {
			c.Shaping += " (no delay: sch_netem is missing from this kernel)"
		}
	}
	return nil
}

// parseRate reads tc's rate syntax ("1gbit", "500mbit") as bits per second.
func parseRate(s string) (int64, error) {
	s = strings.ToLower(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("want a rate such as 1gbit")
	}
	return int64(f * float64(mult)), nil
}

// Enter is the command prefix that runs a program on node i: in its
// namespace, under its host name.
func (c *Cluster) Enter(i int) []string {
	return []string{"ip", "netns", "exec", c.Nodes[i].NS, "unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$@"`, c.Nodes[i].Name}
}

// Command runs name on node i with env as its whole environment, in a
// process group of its own (so that a caller may signal it and its
// children as one).
func (c *Cluster) Command(i int, env []string, name string, args ...string) *exec.Cmd {
	argv := append(append(c.Enter(i), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Close kills what still runs in the nodes and removes the namespaces
// (with their links, bridge and qdiscs) and the nodes' hosts files.
func (c *Cluster) Close() error {
	var errs []error
	for _, ns := range append(c.namespaces(), c.Switch) {
		if err := remove(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) namespaces() []string {
	var ns []string
	for _, n := range c.Nodes {
		ns = append(ns, n.NS)
	}
	return ns
}

// remove kills the processes of namespace ns and deletes it.
func remove(ns string) error {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(filepath.Join("/etc/netns", ns))
	if err := exec.Command("ip", "netns", "del", ns).Run(); err != nil && exists(ns) {
		return fmt.Errorf("netcluster: deleting namespace %s: %v", ns, err)
	}
	return nil
}

func exists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

// SweepStale removes the namespaces of clusters whose creating process
// has exited, and returns their names.
func SweepStale() []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var removed []string
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "_")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		if remove(name) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}
