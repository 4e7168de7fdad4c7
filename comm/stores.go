package comm

import (
	"context"
	"time"

	"github.com/goddp/goddp/comm/store"
)

// The rendezvous store lives in goddp/comm/store (launchers import it
// without linking any backend); these names keep the torch-style ones
// (TCPStore, FileStore, PrefixStore) reachable from comm.

// StoreServer is a TCP store hosted by this process (torch's TCPStore with is_master).
type StoreServer = store.Server

// StoreOption configures a store (token, timeout, logger).
type StoreOption = store.Option

// ListenStore hosts a TCP store at addr; see store.Listen.
func ListenStore(ctx context.Context, addr string, opts ...StoreOption) (*StoreServer, error) {
	return store.Listen(ctx, addr, opts...)
}

// DialStore connects to the TCP store at addr; see store.Dial.
func DialStore(ctx context.Context, addr string, opts ...StoreOption) (Store, error) {
	return store.Dial(ctx, addr, opts...)
}

// NewFileStore opens (or creates) a store shared through a file; see store.NewFile.
func NewFileStore(path string, opts ...StoreOption) (Store, error) {
	return store.NewFile(path, opts...)
}

// NewPrefixStore namespaces every key of s under prefix; see store.NewPrefix.
func NewPrefixStore(prefix string, s Store) Store { return store.NewPrefix(prefix, s) }

// WithToken sets the job token both ends of a store connection must share.
func WithToken(token string) StoreOption { return store.WithToken(token) }

// WithStoreTimeout bounds each store call that has no ctx deadline.
func WithStoreTimeout(d time.Duration) StoreOption { return store.WithTimeout(d) }

// WithStoreLogger receives the store's diagnostics (refused connections).
func WithStoreLogger(logf func(format string, args ...any)) StoreOption {
	return store.WithLogger(logf)
}
