package store

import (
	"context"
	"github.com/goddp/goddp/comm/backend"
	"net"
)

// prefixStore namespaces every key of an underlying store (torch's PrefixStore).
type prefixStore struct {
	prefix string
	s      backend.Store
}

// NewPrefix returns a Store that puts prefix + "/" before every key of
// s. NumKeys counts the keys of the whole underlying store, as in torch, and
// Close closes s.
func NewPrefix(prefix string, s backend.Store) backend.Store {
	return &prefixStore{prefix: prefix + "/", s: s}
}

// Unwrap returns the underlying store.
func (p *prefixStore) Unwrap() backend.Store { return p.s }

func (p *prefixStore) k(key string) string { return p.prefix + key }

func (p *prefixStore) Set(ctx context.Context, key string, value []byte) error {
	return p.s.Set(ctx, p.k(key), value)
}

func (p *prefixStore) Get(ctx context.Context, key string) ([]byte, error) {
	return p.s.Get(ctx, p.k(key))
}

func (p *prefixStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	return p.s.Add(ctx, p.k(key), delta)
}

func (p *prefixStore) Wait(ctx context.Context, keys ...string) error {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = p.k(k)
	}
	return p.s.Wait(ctx, full...)
}

func (p *prefixStore) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	return p.s.CompareSet(ctx, p.k(key), expected, desired)
}

func (p *prefixStore) Delete(ctx context.Context, key string) (bool, error) {
	return p.s.Delete(ctx, p.k(key))
}

func (p *prefixStore) NumKeys(ctx context.Context) (int64, error) { return p.s.NumKeys(ctx) }

func (p *prefixStore) Close() error { return p.s.Close() }

// LocalAddr digs through wrappers for the local address of a TCP store
// connection; nil when the store is not a socket (file or in-process).
func LocalAddr(s backend.Store) net.Addr {
	for s != nil {
		switch v := s.(type) {
		case interface{ LocalAddr() net.Addr }:
			return v.LocalAddr()
		case interface{ Unwrap() backend.Store }:
			s = v.Unwrap()
		default:
			return nil
		}
	}
	return nil
}
