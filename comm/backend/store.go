package backend

import "context"

// Store is the rendezvous key-value store (torch's c10d Store). Get and Wait
// block until the keys exist, ctx ends, or the store's timeout passes.
// goddp/comm/store implements it over TCP and over a shared file.
type Store interface {
	Set(ctx context.Context, key string, value []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	// Add atomically adds delta to the integer at key (created at 0) and returns the new value.
	Add(ctx context.Context, key string, delta int64) (int64, error)
	Wait(ctx context.Context, keys ...string) error
	// CompareSet sets key to desired if its current value equals expected
	// (an empty expected matches a missing key) and returns the value now stored.
	CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error)
	// Delete removes key and reports whether it existed.
	Delete(ctx context.Context, key string) (bool, error)
	NumKeys(ctx context.Context) (int64, error)
	Close() error
}
