package comm

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Options configure a backend when a process group is created.
type Options struct {
	Rank      int
	Size      int
	Store     Store         // rendezvous store shared by all ranks
	Timeout   time.Duration // per-op timeout; DefaultTimeout when zero
	Token     string        // job token for authenticated peer connections, may be empty
	Prefix    string        // store key prefix for this group (subgroups)
	LocalRank int
	LocalSize int
	// Addr is the address this rank's peer listener binds to ("" = pick from the store connection).
	Addr string
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

// lookup returns the factory registered under name.
func lookup(name string) (Factory, error) {
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
