package launch

import (
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Rendezvous backends. "c10d" is accepted as an alias of "store".
const (
	BackendStatic = "static"
	BackendStore  = "store"
)

// Defaults, torchrun's where torchrun has one.
const (
	DefaultMasterAddr      = "127.0.0.1"
	DefaultMasterPort      = 29500
	DefaultRdzvPort        = 29400
	DefaultMonitorInterval = 100 * time.Millisecond
	DefaultRdzvTimeout     = 900 * time.Second
	DefaultLastCall        = 30 * time.Second
	DefaultStopGrace       = 5 * time.Second
	DefaultHeartbeat       = 30 * time.Second
	DefaultTailLines       = 20
)

// Config is everything one node's launcher needs. ParseArgs builds it from
// ddprun's command line; library users fill it directly. Zero fields take
// the defaults above (NodeRank: use -1 for "assigned at rendezvous").
type Config struct {
	// Program is a binary path, a name on $PATH, a Go package directory or a
	// .go file; packages are built once per run with `go build` (see BuildCache).
	Program string
	Args    []string
	// BuildFlags are extra `go build` flags for a package PROGRAM (e.g. "-tags=cuda").
	BuildFlags []string
	// BuildCache keeps the binaries of package PROGRAMs between runs, one
	// per package and set of build flags. Empty: goddp/ddprun-build under
	// os.UserCacheDir (a per-run temp dir when there is none).
	BuildCache string

	NProcPerNode int // workers on this node (>= 1)
	MinNodes     int // --nnodes MIN:MAX (or N:N)
	MaxNodes     int
	NodeRank     int // this node's rank; -1: assigned at rendezvous (store backend)

	MasterAddr string // static backend: address of node 0 (default 127.0.0.1)
	MasterPort int    // static backend: port of node 0's store (default 29500)
	// LocalAddr is the address other nodes use to reach this one (default:
	// the source address of this node's connection to the rendezvous store).
	LocalAddr string

	RdzvBackend  string        // "static" (default) or "store"
	RdzvEndpoint string        // host:port of the rendezvous store (store backend)
	RdzvID       string        // job id; nodes with different ids never meet
	RdzvTimeout  time.Duration // how long nodes are waited for
	// LastCall is how long the rendezvous waits for more nodes once MinNodes
	// have joined (elastic MIN:MAX only).
	LastCall time.Duration
	// HeartbeatTimeout: a node whose launcher stops updating its heartbeat
	// this long is declared dead (multi-node only).
	HeartbeatTimeout time.Duration
	// Standalone: single node; the launcher picks a free port and hosts the
	// store itself.
	Standalone bool

	MaxRestarts     int
	MonitorInterval time.Duration
	// StopGrace is how long workers get between SIGTERM and SIGKILL.
	StopGrace time.Duration

	// LogDir holds per-attempt, per-worker stdout.log, stderr.log and
	// error.json. Empty: a temp dir (kept only if Redirects or Tee ask for files).
	LogDir string
	// Redirects and Tee are per local rank: which streams go to files only
	// (Redirects) or to files and the console (Tee).
	Redirects StreamSpec
	Tee       StreamSpec
	// LocalRanksFilter, when non-nil, limits console output to these local ranks.
	LocalRanksFilter []int
	// TailLines is how many stderr lines a failure report shows.
	TailLines int

	// Token is the job token; empty means $GODDP_TOKEN, else a generated one
	// (single node only: every node of a multi-node job needs the same token).
	Token string
	// RequireGPU makes the launcher check for a GPU before starting PROGRAM.
	RequireGPU bool
	// Env is appended to the launcher's environment for every worker.
	Env []string

	// Stdout and Stderr receive the workers' console output; Log receives
	// the launcher's own messages. Defaults: os.Stdout, os.Stderr, Stderr.
	Stdout, Stderr, Log io.Writer
}

// multiNode reports whether the job may span more than this node.
func (c *Config) multiNode() bool { return c.MaxNodes > 1 }

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.MinNodes == 0 && c.MaxNodes == 0 {
		c.MinNodes, c.MaxNodes = 1, 1
	}
	if c.MaxNodes == 0 {
		c.MaxNodes = c.MinNodes
	}
	if c.MasterAddr == "" {
		c.MasterAddr = DefaultMasterAddr
	}
	if c.MasterPort == 0 && !c.Standalone {
		c.MasterPort = DefaultMasterPort
	}
	if c.RdzvBackend == "" {
		c.RdzvBackend = BackendStatic
	}
	if c.RdzvBackend == "c10d" {
		c.RdzvBackend = BackendStore
	}
	if c.RdzvTimeout == 0 {
		c.RdzvTimeout = DefaultRdzvTimeout
	}
	if c.LastCall == 0 {
		c.LastCall = DefaultLastCall
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeat
	}
	if c.MonitorInterval == 0 {
		c.MonitorInterval = DefaultMonitorInterval
	}
	if c.StopGrace == 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.TailLines == 0 {
		c.TailLines = DefaultTailLines
	}
	if c.RdzvID == "" {
		c.RdzvID = "none"
	}
	if c.MaxNodes <= 1 && c.NodeRank < 0 {
		c.NodeRank = 0
	}
	return c
}

// Validate checks the configuration; errors match ErrUsage.
func (c *Config) Validate() error {
	switch {
	case c.Program == "":
		return usagef("missing PROGRAM (usage: ddprun [flags] PROGRAM [args...])")
	case c.NProcPerNode < 1:
		return usagef("--nproc-per-node must be at least 1, got %d", c.NProcPerNode)
	case c.MinNodes < 1 || c.MaxNodes < c.MinNodes:
		return usagef("--nnodes must be N or MIN:MAX with 1 <= MIN <= MAX, got %d:%d", c.MinNodes, c.MaxNodes)
	case c.MaxRestarts < 0:
		return usagef("--max-restarts must be >= 0, got %d", c.MaxRestarts)
	case c.MonitorInterval < 0 || c.RdzvTimeout < 0 || c.StopGrace < 0:
		return usagef("durations must not be negative")
	case c.RdzvBackend != BackendStatic && c.RdzvBackend != BackendStore:
		return usagef("--rdzv-backend must be static or store (c10d), got %q", c.RdzvBackend)
	case c.MasterPort < 0 || c.MasterPort > 65535:
		return usagef("--master-port must be in 0..65535, got %d", c.MasterPort)
	case c.NodeRank < -1:
		return usagef("--node-rank must be >= 0, got %d", c.NodeRank)
	}
	if err := checkRdzvID(c.RdzvID); err != nil {
		return err
	}
	if c.Standalone && c.MaxNodes > 1 {
		return usagef("--standalone runs a single node; it cannot be combined with --nnodes %d:%d", c.MinNodes, c.MaxNodes)
	}
	if c.RdzvBackend == BackendStatic && c.MinNodes != c.MaxNodes {
		return usagef("--nnodes %d:%d (elastic) needs --rdzv-backend store", c.MinNodes, c.MaxNodes)
	}
	if c.NodeRank >= c.MaxNodes {
		return usagef("--node-rank %d must be less than --nnodes %d", c.NodeRank, c.MaxNodes)
	}
	if c.multiNode() {
		if c.RdzvBackend == BackendStatic && c.NodeRank < 0 {
			return usagef("--rdzv-backend static with --nnodes %d needs --node-rank", c.MaxNodes)
		}
		if c.RdzvBackend == BackendStore && c.RdzvEndpoint == "" {
			return usagef("--rdzv-backend store needs --rdzv-endpoint HOST:PORT")
		}
		if _, _, err := c.rdzvHostPort(); err != nil {
			return err
		}
	}
	for _, r := range c.LocalRanksFilter {
		if r < 0 || r >= c.NProcPerNode {
			return usagef("--local-ranks-filter: local rank %d is not in 0..%d", r, c.NProcPerNode-1)
		}
	}
	return nil
}

// rdzvHostPort is where the nodes meet: --rdzv-endpoint for the store
// backend, --master-addr:--master-port for static.
func (c *Config) rdzvHostPort() (string, int, error) {
	if c.RdzvBackend == BackendStatic {
		return c.MasterAddr, c.MasterPort, nil
	}
	host, port, err := net.SplitHostPort(c.RdzvEndpoint)
	if err != nil {
		// "host" alone: torchrun's default port.
		if _, _, err2 := net.SplitHostPort(c.RdzvEndpoint + ":0"); err2 == nil {
			return c.RdzvEndpoint, DefaultRdzvPort, nil
		}
		return "", 0, usagef("--rdzv-endpoint %q is not HOST[:PORT]: %v", c.RdzvEndpoint, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, usagef("--rdzv-endpoint %q: bad port", c.RdzvEndpoint)
	}
	return host, p, nil
}

// checkRdzvID refuses ids that are not one plain file name: the id names the
// run's directory under --log-dir and its temp dir, so "../../etc" would
// write the workers' logs outside --log-dir.
func checkRdzvID(id string) error {
	if id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00") {
		return usagef("--rdzv-id %q must be a plain name (no '/', '\\', NUL, and not '.' or '..'): it names the run's directory under --log-dir", id)
	}
	return nil
}
