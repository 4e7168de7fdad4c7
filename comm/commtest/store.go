package commtest

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"time"
)

// Store is an in-process backend.Store, for tests that run every rank of
// a backend as a goroutine of one process; NewStore returns one. Blocking
// Get and Wait honour ctx.
type Store struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every write
	kv      map[string][]byte
}

// NewStore returns an empty in-process store.
func NewStore() *Store {
	return &Store{kv: map[string][]byte{}, changed: make(chan struct{})}
}

func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Store) Set(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv[key] = bytes.Clone(value)
	s.notifyLocked()
	return nil
}

func (s *Store) waitFor(ctx context.Context, keys ...string) error {
	for {
		s.mu.Lock()
		ch, all := s.changed, true
		for _, k := range keys {
			if _, ok := s.kv[k]; !ok {
				all = false
			}
		}
		s.mu.Unlock()
		if all {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.waitFor(ctx, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.kv[key]), nil
}

func (s *Store) Add(_ context.Context, key string, delta int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := strconv.ParseInt(string(s.kv[key]), 10, 64)
	n += delta
	s.kv[key] = []byte(strconv.FormatInt(n, 10))
	s.notifyLocked()
	return n, nil
}

func (s *Store) Wait(ctx context.Context, keys ...string) error { return s.waitFor(ctx, keys...) }

func (s *Store) CompareSet(_ context.Context, key string, expected, desired []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.kv[key]
	if (!ok && len(expected) == 0) || (ok && bytes.Equal(cur, expected)) {
		s.kv[key] = bytes.Clone(desired)
		s.notifyLocked()
		return bytes.Clone(desired), nil
	}
	return bytes.Clone(cur), nil
}

func (s *Store) Delete(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.kv[key]
	delete(s.kv, key)
	return ok, nil
}

func (s *Store) NumKeys(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.kv)), nil
}

func (s *Store) Close() error { return nil }
