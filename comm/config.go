package comm

import (
	"fmt"
	"github.com/goddp/goddp/comm/internal/auth"
	"github.com/goddp/goddp/internal/launchenv"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultMasterPort is torch's default rendezvous port.
const DefaultMasterPort = 29500

// Config describes how this process joins the job (torch's
// init_process_group arguments). ConfigFromEnv fills it from the launcher's
// environment; the zero values of the optional fields pick the defaults.
type Config struct {
	Backend    string // "auto" (default), "tcp", "shm", or any registered name
	InitMethod string // "env://" (default), "tcp://host:port" or "file:///path"
	Rank       int
	WorldSize  int
	// LocalRank and LocalWorldSize place the rank on its node. When
	// LocalWorldSize is 0 Init derives both from the ranks' host names
	// (and, when ConfigFromEnv found a LOCAL_RANK without a local world
	// size, fails unless it matches).
	LocalRank      int
	LocalWorldSize int
	MasterAddr     string        // env:// store host (MASTER_ADDR); default 127.0.0.1
	MasterPort     int           // env:// store port (MASTER_PORT); default 29500
	Timeout        time.Duration // per-op and rendezvous timeout; default 10 min (GODDP_TIMEOUT)
	// Token is the job secret (GODDP_TOKEN), at least 16 bytes: every
	// connection to the store and between ranks proves it. "" disables
	// authentication, which Init allows only on loopback unless Insecure.
	Token string
	// Insecure lets a job with no Token listen on a routable address
	// (GODDP_INSECURE=1); every rank then prints a warning.
	Insecure bool
	// StoreHosted says the launcher already runs the store at
	// MasterAddr:MasterPort, so rank 0 connects instead of hosting it
	// (GODDP_STORE_HOSTED=1).
	StoreHosted bool
	// StoreBind is the address rank 0's store listens on; default
	// MasterAddr:MasterPort exactly. Set "0.0.0.0:29500" to listen on every
	// interface (GODDP_STORE_BIND).
	StoreBind string
	// StorePrefix namespaces this job's keys in a shared store; ConfigFromEnv
	// derives it from the launcher's run id and restart count so a restarted
	// group never reads the previous attempt's keys. A store serves one job
	// at a time per first element of the prefix ("goddp"): see RunID.
	StorePrefix string
	// RunID names the job (GODDP_RUN_ID, TORCHELASTIC_RUN_ID, which ddprun
	// sets, or SLURM_JOB_ID). Rank 0 publishes it, or one it makes up when
	// empty, and Init refuses a rank whose RunID differs, naming both: a
	// rank of another job that reached this job's store. Without one on
	// either side, the job's fingerprint (program, arguments without the
	// per-rank flags, world size) tells two jobs apart instead; set the
	// same RunID on every rank of a job whose ranks differ in those on
	// purpose, and on the ranks of two otherwise identical jobs (see
	// fingerprint.go).
	RunID string
	// Addr is the host (or host:port) this rank's peer listener binds to;
	// default: the interface that reaches the store (GODDP_ADDR).
	Addr string
	// Logf receives diagnostics (stall reports, refused connections);
	// nil means stderr on rank 0.
	Logf func(format string, args ...any)
	// StallThreshold: see Options (GODDP_STALL_THRESHOLD, "off" disables).
	StallThreshold time.Duration
	// DebugCollectives checks op/dtype/size agreement on every collective
	// (GODDP_DEBUG_COLLECTIVES=1).
	DebugCollectives bool

	// localRankFrom names the variable ConfigFromEnv read LocalRank from
	// when no local world size came with it; Init checks it.
	localRankFrom string
	// print, when set, is the program, arguments and directory this rank
	// presents as its job's fingerprint instead of its process's: tests
	// run the ranks of two jobs in one process with it.
	print *jobPrint
}

// Validate reports the first inconsistency in c.
func (c Config) Validate() error {
	switch {
	case c.WorldSize < 1:
		return fmt.Errorf("%w: world size %d (set WORLD_SIZE)", ErrBadArgument, c.WorldSize)
	case c.Rank < 0 || c.Rank >= c.WorldSize:
		return fmt.Errorf("%w: rank %d outside world size %d", ErrBadArgument, c.Rank, c.WorldSize)
	case c.LocalWorldSize < 0 || (c.LocalWorldSize > 0 && (c.LocalRank < 0 || c.LocalRank >= c.LocalWorldSize)):
		return fmt.Errorf("%w: local rank %d outside local world size %d", ErrBadArgument, c.LocalRank, c.LocalWorldSize)
	case c.Timeout < 0:
		return fmt.Errorf("%w: negative timeout %v", ErrBadArgument, c.Timeout)
	case c.MasterPort < 0 || c.MasterPort > 65535:
		return fmt.Errorf("%w: master port %d", ErrBadArgument, c.MasterPort)
	}
	if err := auth.CheckToken(c.Token); err != nil {
		return err
	}
	if _, _, err := c.initTarget(); err != nil {
		return err
	}
	return nil
}

// initTarget parses InitMethod into a scheme ("env", "tcp", "file") and an
// address or path.
func (c Config) initTarget() (scheme, target string, err error) {
	m := c.InitMethod
	if m == "" {
		m = "env://"
	}
	scheme, rest, ok := strings.Cut(m, "://")
	if !ok {
		return "", "", fmt.Errorf("%w: init method %q (want env://, tcp://host:port or file:///path)", ErrBadArgument, m)
	}
	switch scheme {
	case "env":
		host := c.MasterAddr
		if host == "" {
			host = "127.0.0.1"
		}
		port := c.MasterPort
		if port == 0 && c.WorldSize > 1 {
			port = DefaultMasterPort
		}
		// A world of one (a program run without a launcher) has no peer to
		// find its store: it takes a free port rather than torch's default,
		// so that two such programs, or tests, on one host never collide.
		return scheme, net.JoinHostPort(host, strconv.Itoa(port)), nil
	case "tcp":
		if _, _, err := net.SplitHostPort(rest); err != nil {
			return "", "", fmt.Errorf("%w: init method %q: %v", ErrBadArgument, m, err)
		}
		return scheme, rest, nil
	case "file":
		if rest == "" {
			return "", "", fmt.Errorf("%w: init method %q has no path", ErrBadArgument, m)
		}
		return scheme, rest, nil
	}
	return "", "", fmt.Errorf("%w: init method %q (want env://, tcp://host:port or file:///path)", ErrBadArgument, m)
}

// ConfigFromEnv reads the launcher's environment. The rank, world size
// and local placement come from goddp/internal/launchenv, the reader every
// goddp package shares; in order of precedence:
//   - torchrun/ddprun and Kubernetes PyTorchJob: RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE;
//   - OpenMPI's mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//     (and MPICH's PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS);
//   - Slurm's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and
//     SLURM_NTASKS_PER_NODE or the per-node task list.
//
// A launcher that sets only one of its rank/world pair, or a value that is
// not an integer, is an error. The master is MASTER_ADDR and MASTER_PORT,
// else the first host of SLURM_NODELIST.
//
// plus GODDP_BACKEND, GODDP_INIT_METHOD, GODDP_TIMEOUT (a Go duration or
// seconds), GODDP_TOKEN, GODDP_INSECURE, GODDP_STORE_HOSTED, GODDP_STORE_BIND, GODDP_ADDR,
// GODDP_STALL_THRESHOLD and GODDP_DEBUG_COLLECTIVES.
func ConfigFromEnv() (Config, error) { return configFromLookup(os.LookupEnv) }

func configFromLookup(lookup func(string) (string, bool)) (Config, error) {
	get := func(keys ...string) (string, string, bool) {
		for _, k := range keys {
			if v, ok := lookup(k); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v), k, true
			}
		}
		return "", "", false
	}
	var firstErr error
	num := func(keys ...string) (int, bool) {
		v, k, ok := get(keys...)
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%w: %s=%q is not an integer", ErrBadArgument, k, v)
		}
		return n, err == nil
	}
	dur := func(key string) time.Duration {
		v, _, ok := get(key)
		if !ok {
			return 0
		}
		d, err := parseEnvDuration(v)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%w: %s=%q: %v", ErrBadArgument, key, v, err)
		}
		return d
	}
	flag := func(key string) bool {
		v, _, _ := get(key)
		b, _ := strconv.ParseBool(v)
		return b
	}

	var c Config
	// Rank and world come from the one reader every package shares, so
	// comm and the data sampler can never disagree about them.
	le, err := launchenv.Parse(lookup)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrBadArgument, err)
	}
	c.Rank, c.WorldSize = le.Rank, le.WorldSize
	if le.HasLocal {
		c.LocalRank, c.LocalWorldSize = le.LocalRank, le.LocalWorldSize
	} else if n, ok := num(localRankKeys()...); ok {
		// A local rank with no local world size: Init derives the
		// placement from the hosts and fails if this one disagrees,
		// instead of ignoring it.
		_, c.localRankFrom, _ = get(localRankKeys()...)
		c.LocalRank = n
	}
	c.MasterAddr, _, _ = get("MASTER_ADDR")
	if c.MasterAddr == "" {
		if nl, _, ok := get("SLURM_NODELIST", "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST"); ok {
			host, err := firstNodeListHost(nl)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			c.MasterAddr = host
		}
	}
	c.MasterPort, _ = num("MASTER_PORT")
	c.Backend, _, _ = get("GODDP_BACKEND")
	c.InitMethod, _, _ = get("GODDP_INIT_METHOD")
	c.Timeout = dur("GODDP_TIMEOUT")
	c.Token, _, _ = get("GODDP_TOKEN")
	c.Insecure = flag("GODDP_INSECURE")
	c.StoreHosted = flag("GODDP_STORE_HOSTED")
	c.StoreBind, _, _ = get("GODDP_STORE_BIND")
	c.Addr, _, _ = get("GODDP_ADDR")
	if v, _, ok := get("GODDP_STALL_THRESHOLD"); ok && (v == "off" || v == "0") {
		c.StallThreshold = -1
	} else {
		c.StallThreshold = dur("GODDP_STALL_THRESHOLD")
	}
	c.DebugCollectives = flag("GODDP_DEBUG_COLLECTIVES")
	run, _, _ := get("GODDP_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")
	c.RunID = run
	restart, _, _ := get("GODDP_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")
	if run != "" || restart != "" {
		c.StorePrefix = "goddp/" + run + "/" + restart
	}
	if firstErr != nil {
		return c, firstErr
	}
	return c, c.Validate()
}

// localRankKeys are the launchers' local rank variables, in launchenv's order.
func localRankKeys() []string {
	return []string{"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}
}

// parseEnvDuration accepts a Go duration ("90s", "10m") or plain seconds ("600").
func parseEnvDuration(v string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		// ParseFloat takes "inf" and "NaN" too, and a float that large
		// converts to a nonsense (negative) Duration.
		const most = time.Duration(math.MaxInt64)
		switch {
		case math.IsNaN(secs) || math.IsInf(secs, 0):
			return 0, fmt.Errorf("want a number of seconds or a Go duration, not %q", v)
		case secs < 0:
			return 0, fmt.Errorf("negative duration")
		case secs >= most.Seconds():
			return 0, fmt.Errorf("%s seconds is longer than the most a timeout can be (%v)", v, most)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		return 0, fmt.Errorf("negative duration")
	}
	return d, err
}

// MaxNodeListHosts caps how many hosts ExpandNodeList returns: a node list
// is short text, and "n[0-3000]-[0-3000]" alone names 9 million hosts.
const MaxNodeListHosts = 1 << 16

// ExpandNodeList expands a Slurm host list such as "node[01-04,07],gpu5"
// into host names, keeping zero padding. It handles any number of bracket
// groups per name ("rack[1-2]-n[1-2]"). A list naming more than
// MaxNodeListHosts hosts is refused before anything is expanded.
func ExpandNodeList(list string) ([]string, error) {
	items, total, err := parseNodeList(list)
	if err != nil {
		return nil, err
	}
	if total > MaxNodeListHosts {
		return nil, fmt.Errorf("%w: node list %q names more than %d hosts", ErrBadArgument, list, MaxNodeListHosts)
	}
	out := make([]string, 0, total)
	for _, it := range items {
		out = it.expand(out, "", 0)
	}
	return out, nil
}

// firstNodeListHost is the first host of a Slurm host list, which is all
// ConfigFromEnv needs: the list is checked whole but never expanded, so any
// list a node's environment can hold costs its length, not its host count.
func firstNodeListHost(list string) (string, error) {
	items, _, err := parseNodeList(list)
	if err != nil || len(items) == 0 {
		return "", err
	}
	return items[0].first(), nil
}

// hostPattern is one item of a node list: literal text and bracket groups,
// parts[i] followed by groups[i], then tail.
type hostPattern struct {
	parts  []string
	groups [][]hostRange
	tail   string
}

// hostRange is lo-hi of a bracket group, numbers printed at least width
// digits wide (the zero padding of lo).
type hostRange struct{ lo, hi, width int }

// parseNodeList parses every item of list and counts the hosts it names,
// saturating at MaxNodeListHosts+1.
func parseNodeList(list string) ([]hostPattern, int, error) {
	var items []hostPattern
	total := 0
	for _, item := range splitTopLevel(list) {
		if item == "" {
			continue
		}
		hp, err := parseHostPattern(item)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: node list %q: %v", ErrBadArgument, list, err)
		}
		items = append(items, hp)
		total = min(total+hp.count(), MaxNodeListHosts+1)
	}
	return items, total, nil
}

func parseHostPattern(p string) (hostPattern, error) {
	var hp hostPattern
	for {
		open := strings.IndexByte(p, '[')
		if open < 0 {
			if strings.ContainsRune(p, ']') {
				return hp, fmt.Errorf("unbalanced ']' in %q", p)
			}
			hp.tail = p
			return hp, nil
		}
		closing := strings.IndexByte(p[open:], ']')
		if closing < 0 {
			return hp, fmt.Errorf("unbalanced '[' in %q", p)
		}
		closing += open
		prefix, body := p[:open], p[open+1:closing]
		if strings.ContainsRune(prefix, ']') {
			return hp, fmt.Errorf("unbalanced ']' in %q", prefix)
		}
		var group []hostRange
		for _, rng := range strings.Split(body, ",") {
			lo, hi, isRange := strings.Cut(rng, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a > b || a < 0 {
				return hp, fmt.Errorf("bad range %q", rng)
			}
			if b-a > MaxNodeListHosts {
				return hp, fmt.Errorf("range %q names more than %d hosts", rng, MaxNodeListHosts)
			}
			group = append(group, hostRange{lo: a, hi: b, width: len(lo)})
		}
		hp.parts, hp.groups = append(hp.parts, prefix), append(hp.groups, group)
		p = p[closing+1:]
	}
}

// count is how many hosts hp names, saturating at MaxNodeListHosts+1 so
// that the product of the groups cannot overflow.
func (hp hostPattern) count() int {
	n := 1
	for _, g := range hp.groups {
		k := 0
		for _, r := range g {
			k += r.hi - r.lo + 1 // each range is at most MaxNodeListHosts+1
		}
		n = min(n*min(k, MaxNodeListHosts+1), MaxNodeListHosts+1)
	}
	return n
}

func (r hostRange) format(i int) string {
	num := strconv.Itoa(i)
	if pad := r.width - len(num); pad > 0 {
		num = strings.Repeat("0", pad) + num
	}
	return num
}

// first is the first host hp names.
func (hp hostPattern) first() string {
	var b strings.Builder
	for i, part := range hp.parts {
		b.WriteString(part)
		b.WriteString(hp.groups[i][0].format(hp.groups[i][0].lo))
	}
	b.WriteString(hp.tail)
	return b.String()
}

// expand appends the hosts of hp from group i on, after prefix, to out.
func (hp hostPattern) expand(out []string, prefix string, i int) []string {
	if i == len(hp.groups) {
		return append(out, prefix+hp.tail)
	}
	for _, r := range hp.groups[i] {
		for n := r.lo; n <= r.hi; n++ {
			out = hp.expand(out, prefix+hp.parts[i]+r.format(n), i+1)
		}
	}
	return out
}

// splitTopLevel splits on commas outside brackets.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}
