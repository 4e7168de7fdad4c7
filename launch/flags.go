package launch

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// flagSpec is one ddprun flag. Names are written with dashes; the
// underscore spelling (--nproc_per_node) is accepted for each.
type flagSpec struct {
	names  []string
	arg    string // "" for a boolean flag
	help   string
	setter func(c *Config, v string) error
}

func flagTable() []flagSpec {
	return []flagSpec{
		{[]string{"nproc-per-node"}, "N|auto|cpu|gpu", "workers on this node: a number, cpu (one per core), gpu (one per GPU that NVML lists and CUDA_VISIBLE_DEVICES leaves visible) or auto (gpu if any, else cpu); default 1",
			func(c *Config, v string) (err error) { c.NProcPerNode, err = ResolveNProc(v); return }},
		{[]string{"nnodes"}, "N|MIN:MAX", "number of nodes, or an elastic range (store backend); default 1",
			func(c *Config, v string) (err error) { c.MinNodes, c.MaxNodes, err = parseNNodes(v); return }},
		{[]string{"node-rank"}, "R", "rank of this node, 0..nnodes-1 (required for static multi-node)",
			func(c *Config, v string) error { return setInt(&c.NodeRank, v, "--node-rank") }},
		{[]string{"master-addr"}, "ADDR", "static backend: address of node 0, where its launcher hosts the store; default 127.0.0.1",
			func(c *Config, v string) error { c.MasterAddr = v; return nil }},
		{[]string{"master-port"}, "PORT", "static backend: port of node 0's store; default 29500",
			func(c *Config, v string) error { return setInt(&c.MasterPort, v, "--master-port") }},
		{[]string{"local-addr"}, "ADDR", "address other nodes use to reach this node (default: detected)",
			func(c *Config, v string) error { c.LocalAddr = v; return nil }},
		{[]string{"rdzv-backend"}, "static|store", "how nodes meet: static (fixed --nnodes and --node-rank) or store (c10d-like, elastic); default static",
			func(c *Config, v string) error { c.RdzvBackend = v; return nil }},
		{[]string{"rdzv-endpoint"}, "HOST[:PORT]", "store backend: the rendezvous store, hosted by the launcher of node 0 (default port 29400)",
			func(c *Config, v string) error { c.RdzvEndpoint = v; return nil }},
		{[]string{"rdzv-id"}, "ID", "job id shared by all nodes of one job; default none",
			func(c *Config, v string) error { c.RdzvID = v; return nil }},
		{[]string{"rdzv-timeout"}, "DUR", "how long to wait for all nodes to join (seconds or Go duration); default 900",
			func(c *Config, v string) error { return setDur(&c.RdzvTimeout, v, "--rdzv-timeout") }},
		{[]string{"rdzv-conf"}, "K=V,...", "rendezvous options: join_timeout, last_call_timeout, heartbeat_timeout (seconds)",
			parseRdzvConf},
		{[]string{"standalone"}, "", "single node: pick a free port and host the store here (ignores --master-addr/--master-port)",
			func(c *Config, v string) error { return setBool(&c.Standalone, v, "--standalone") }},
		{[]string{"max-restarts"}, "N", "restart the worker group up to N times after a failure; default 0",
			func(c *Config, v string) error { return setInt(&c.MaxRestarts, v, "--max-restarts") }},
		{[]string{"monitor-interval"}, "DUR", "how often workers and other nodes are checked (seconds or Go duration); default 0.1",
			func(c *Config, v string) error { return setDur(&c.MonitorInterval, v, "--monitor-interval") }},
		{[]string{"grace-period"}, "DUR", "time between SIGTERM and SIGKILL when workers are stopped; default 5",
			func(c *Config, v string) error { return setDur(&c.StopGrace, v, "--grace-period") }},
		{[]string{"log-dir"}, "DIR", "write each worker's stdout.log, stderr.log and error.json under DIR/RUN_ID/attempt_N/LOCAL_RANK/",
			func(c *Config, v string) error { c.LogDir = v; return nil }},
		{[]string{"redirects", "r"}, "SPEC", "send streams to log files only: 0 none, 1 stdout, 2 stderr, 3 both, or per rank as 0:1,1:2",
			func(c *Config, v string) (err error) { c.Redirects, err = ParseStreamSpec(v); return }},
		{[]string{"tee", "t"}, "SPEC", "copy streams to log files and the console, with a [rankN]: prefix; same SPEC as --redirects",
			func(c *Config, v string) (err error) { c.Tee, err = ParseStreamSpec(v); return }},
		{[]string{"local-ranks-filter"}, "R,R,...", "show console output of these local ranks only",
			func(c *Config, v string) (err error) {
				c.LocalRanksFilter, err = parseIntList(v, "--local-ranks-filter")
				return
			}},
		{[]string{"build-flags"}, "FLAGS", "extra `go build` flags when PROGRAM is a Go package, e.g. \"-tags=cuda\"",
			func(c *Config, v string) error { c.BuildFlags = strings.Fields(v); return nil }},
		{[]string{"require-gpu"}, "", "check with NVML that a GPU exists before starting PROGRAM (automatic for binaries linking gorgonia.org/cu)",
			func(c *Config, v string) error { return setBool(&c.RequireGPU, v, "--require-gpu") }},
		{[]string{"role"}, "NAME", "accepted for torchrun compatibility; ignored",
			func(*Config, string) error { return nil }},
		{[]string{"start-method"}, "METHOD", "accepted for torchrun compatibility; ignored (workers are always new processes)",
			func(*Config, string) error { return nil }},
		{[]string{"no-python"}, "", "accepted for torchrun compatibility; ignored (PROGRAM is always run directly)",
			func(*Config, string) error { return nil }},
	}
}

// ParseArgs parses ddprun's command line (without the program name):
// flags, then PROGRAM and its arguments, which are passed through untouched.
// Flags take "--name value" or "--name=value"; one or two dashes; dashes or
// underscores inside names. Errors match ErrUsage; -h/--help returns ErrHelp.
func ParseArgs(args []string) (Config, error) {
	cfg := Config{NProcPerNode: 1, MinNodes: 1, MaxNodes: 1, NodeRank: -1}
	byName := map[string]*flagSpec{}
	table := flagTable()
	for i := range table {
		for _, n := range table[i].names {
			byName[n] = &table[i]
		}
	}
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		name := strings.TrimLeft(a, "-")
		val, hasVal := "", false
		if k, v, ok := strings.Cut(name, "="); ok {
			name, val, hasVal = k, v, true
		}
		if name == "h" || name == "help" {
			return cfg, ErrHelp
		}
		spec := byName[strings.ReplaceAll(name, "_", "-")]
		if spec == nil {
			return cfg, usagef("unknown flag %s (run ddprun --help for the list)", a)
		}
		i++
		if !hasVal {
			if spec.arg == "" {
				val = "true"
			} else {
				if i >= len(args) {
					return cfg, usagef("flag --%s needs a value (%s)", spec.names[0], spec.arg)
				}
				val = args[i]
				i++
			}
		}
		if err := spec.setter(&cfg, val); err != nil {
			return cfg, err
		}
	}
	if i >= len(args) {
		return cfg, usagef("missing PROGRAM (usage: ddprun [flags] PROGRAM [args...])")
	}
	cfg.Program = args[i]
	cfg.Args = append([]string(nil), args[i+1:]...)
	return cfg, nil
}

// Usage is ddprun's --help text.
func Usage() string {
	var b strings.Builder
	b.WriteString(`usage: ddprun [flags] PROGRAM [args...]

Starts --nproc-per-node copies of PROGRAM (a binary, or a Go package directory
built once with go build) with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR, MASTER_PORT, GODDP_TOKEN, ... set, supervises them, and
stops all of them when one fails. Flags follow torchrun; --flag_name works too.

flags:
`)
	for _, f := range flagTable() {
		name := "--" + f.names[0]
		if len(f.names) > 1 {
			name = "-" + f.names[1] + ", " + name
		}
		if f.arg != "" {
			name += " " + f.arg
		}
		fmt.Fprintf(&b, "  %s\n        %s\n", name, f.help)
	}
	b.WriteString(`
exit codes:
  0  all workers succeeded
  1  a worker failed and no restart was left (the root cause is printed)
  2  usage error (bad flag or value)
  3  rendezvous failure: port in use, store unreachable, nodes missing at timeout
  4  PROGRAM missing, not executable, or does not build
  5  a GPU is required but NVML finds none
  128+N  ddprun was stopped by signal N (forwarded to the workers)
`)
	return b.String()
}

// ResolveNProc turns an --nproc-per-node value into a worker count:
// a number, "cpu" (usable cores), "gpu" (visible GPUs, see GPUCount; ErrNoGPU when
// none) or "auto" (GPUs if any, else cores).
func ResolveNProc(v string) (int, error) {
	switch v {
	case "cpu":
		return runtime.NumCPU(), nil
	case "gpu":
		n, err := GPUCount()
		if err != nil {
			return 0, fmt.Errorf("%w: --nproc-per-node gpu: %w", ErrNoGPU, err)
		}
		if n == 0 {
			return 0, fmt.Errorf("%w: --nproc-per-node gpu: NVML reports 0 devices", ErrNoGPU)
		}
		return n, nil
	case "auto":
		if n, err := GPUCount(); err == nil && n > 0 {
			return n, nil
		}
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, usagef("--nproc-per-node wants a number, auto, cpu or gpu; got %q", v)
	}
	if n < 1 {
		return 0, usagef("--nproc-per-node must be at least 1, got %d", n)
	}
	return n, nil
}

func parseNNodes(v string) (int, int, error) {
	lo, hi, elastic := strings.Cut(v, ":")
	a, err := strconv.Atoi(lo)
	if err != nil {
		return 0, 0, usagef("--nnodes wants N or MIN:MAX, got %q", v)
	}
	b := a
	if elastic {
		if b, err = strconv.Atoi(hi); err != nil {
			return 0, 0, usagef("--nnodes wants N or MIN:MAX, got %q", v)
		}
	}
	if a < 1 || b < a {
		return 0, 0, usagef("--nnodes wants 1 <= MIN <= MAX, got %q", v)
	}
	return a, b, nil
}

func parseRdzvConf(c *Config, v string) error {
	for _, kv := range strings.Split(v, ",") {
		if kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return usagef("--rdzv-conf wants key=value pairs, got %q", kv)
		}
		var err error
		switch k {
		case "join_timeout", "timeout":
			err = setDur(&c.RdzvTimeout, val, "--rdzv-conf "+k)
		case "last_call_timeout":
			err = setDur(&c.LastCall, val, "--rdzv-conf "+k)
		case "heartbeat_timeout":
			err = setDur(&c.HeartbeatTimeout, val, "--rdzv-conf "+k)
		case "read_timeout", "close_timeout", "keep_alive_interval", "keep_alive_max_attempt", "is_host":
			// torch options with no goddp meaning.
		default:
			return usagef("--rdzv-conf: unknown key %q (known: join_timeout, last_call_timeout, heartbeat_timeout)", k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func setInt(dst *int, v, name string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return usagef("%s wants an integer, got %q", name, v)
	}
	*dst = n
	return nil
}

func setBool(dst *bool, v, name string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return usagef("%s wants true or false, got %q", name, v)
	}
	*dst = b
	return nil
}

// setDur accepts seconds ("0.5", as torchrun does) or a Go duration ("500ms").
func setDur(dst *time.Duration, v, name string) error {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 {
			return usagef("%s must not be negative, got %q", name, v)
		}
		*dst = time.Duration(f * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return usagef("%s wants seconds or a duration like 500ms, got %q", name, v)
	}
	*dst = d
	return nil
}

func parseIntList(v, name string) ([]int, error) {
	out := []int{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, usagef("%s wants comma-separated integers, got %q", name, v)
		}
		out = append(out, n)
	}
	sort.Ints(out)
	return out, nil
}

// Std selects standard streams: a bit set of StdOut and StdErr.
type Std uint8

const (
	StdNone Std = 0
	StdOut  Std = 1
	StdErr  Std = 2
	StdAll  Std = StdOut | StdErr
)

// StreamSpec is torchrun's --redirects/--tee value: one Std for all local
// ranks, or a per-rank map ("0:1,1:2"; ranks not named get none).
type StreamSpec struct {
	All     Std
	PerRank map[int]Std
}

// For returns the streams selected for a local rank.
func (s StreamSpec) For(localRank int) Std {
	if s.PerRank != nil {
		return s.PerRank[localRank]
	}
	return s.All
}

// Any reports whether some rank has some stream selected.
func (s StreamSpec) Any() bool {
	if s.All != StdNone {
		return true
	}
	for _, v := range s.PerRank {
		if v != StdNone {
			return true
		}
	}
	return false
}

// ParseStreamSpec parses "3" or "0:1,1:2" (0 none, 1 stdout, 2 stderr, 3 both).
func ParseStreamSpec(v string) (StreamSpec, error) {
	parse := func(s string) (Std, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 3 {
			return 0, usagef("stream spec wants 0 (none), 1 (stdout), 2 (stderr) or 3 (both), got %q", s)
		}
		return Std(n), nil
	}
	if !strings.Contains(v, ":") {
		s, err := parse(v)
		return StreamSpec{All: s}, err
	}
	spec := StreamSpec{PerRank: map[int]Std{}}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, ":")
		r, err := strconv.Atoi(k)
		if !ok || err != nil || r < 0 {
			return spec, usagef("stream spec wants LOCAL_RANK:STREAMS pairs like 0:1,1:2, got %q", v)
		}
		s, err := parse(val)
		if err != nil {
			return spec, err
		}
		spec.PerRank[r] = s
	}
	return spec, nil
}

// envTrue reports whether an environment value is set to a true value.
func envTrue(key string) bool {
	b, _ := strconv.ParseBool(os.Getenv(key))
	return b
}
