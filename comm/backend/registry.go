package backend

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// Options configure a backend when a process group is created.
type Options struct {
	Rank    int
	Size    int
	Store   Store         // rendezvous store shared by all ranks
	Timeout time.Duration // per-op timeout; DefaultTimeout when zero
	Token   string        // job token for authenticated peer connections, may be empty
	// Insecure allows listening on a routable address with no Token
	// (GODDP_INSECURE=1); without it a backend refuses to.
	Insecure  bool
	Prefix    string // store key prefix for this group (subgroups)
	LocalRank int
	LocalSize int
	// Addr is the address this rank's peer listener binds to ("" = pick from the store connection).
	Addr string
	// Logf receives diagnostics: stall reports, refused connections, aborts.
	// nil means stderr on rank 0 and silence elsewhere. It never sees the token.
	Logf func(format string, args ...any)
	// StallThreshold is how long a collective may wait before the stall
	// inspector reports which ranks have not arrived: 0 means
	// DefaultStallThreshold, negative disables the inspector.
	StallThreshold time.Duration
	// DebugCollectives makes every collective first check that all ranks
	// issued the same op, dtype and size, and fail clearly if not.
	DebugCollectives bool
}

// StallLogger returns the logger of stall reports: Logf, or stderr on
// every rank. Each rank that waits names the laggard itself, so a late
// rank 0 is reported too.
func (o *Options) StallLogger() func(format string, args ...any) {
	if o.Logf != nil {
		return o.Logf
	}
	return stderrLogf
}

// DefaultStallThreshold is when the stall inspector first reports.
const DefaultStallThreshold = 60 * time.Second

// TimeoutOrDefault returns the per-op timeout with the default applied.
func (o *Options) TimeoutOrDefault() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// Logger returns the effective logger: Logf, or stderr on rank 0.
func (o *Options) Logger() func(format string, args ...any) {
	if o.Logf != nil {
		return o.Logf
	}
	if o.Rank != 0 {
		return func(string, ...any) {}
	}
	return stderrLogf
}

// stderrLogf writes one line to stderr.
func stderrLogf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// StallThresholdOrDefault returns the inspector threshold, or 0 when disabled.
func (o *Options) StallThresholdOrDefault() time.Duration {
	switch {
	case o.StallThreshold < 0:
		return 0
	case o.StallThreshold == 0:
		return DefaultStallThreshold
	}
	return o.StallThreshold
}

// Factory creates a backend's process group. It must honour ctx for the
// whole connection setup.
type Factory func(ctx context.Context, opts Options) (ProcessGroup, error)

// The backend registry follows database/sql's driver registry: backends
// register in init() and a duplicate name panics. It is the package's only
// mutable state and is written only during program initialisation.
var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a backend available by name. It panics on a duplicate name or nil factory.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if f == nil {
		panic("comm: Register factory is nil for " + name)
	}
	if _, dup := registry[name]; dup {
		panic("comm: Register called twice for backend " + name)
	}
	registry[name] = f
}

// Backends lists the registered backend names.
func Backends() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the factory registered under name, or an error wrapping
// ErrBadArgument that lists the registered names.
func Lookup(name string) (Factory, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[name]
	if !ok {
		names := make([]string, 0, len(registry))
		for n := range registry {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%w: unknown backend %q (registered: %v)", ErrBadArgument, name, names)
	}
	return f, nil
}
