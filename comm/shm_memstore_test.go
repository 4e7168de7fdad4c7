package comm

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"time"
)

// shmMemStore is an in-process Store for tests that run every rank as a
// goroutine of one process (each rank still maps the segment itself).
type shmMemStore struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every write
	kv      map[string][]byte
}

func newShmMemStore() *shmMemStore {
	return &shmMemStore{kv: map[string][]byte{}, changed: make(chan struct{})}
}

func (s *shmMemStore) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *shmMemStore) Set(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv[key] = bytes.Clone(value)
	s.notifyLocked()
	return nil
}

func (s *shmMemStore) waitFor(ctx context.Context, keys ...string) error {
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

func (s *shmMemStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.waitFor(ctx, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.kv[key]), nil
}

func (s *shmMemStore) Add(_ context.Context, key string, delta int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := strconv.ParseInt(string(s.kv[key]), 10, 64)
	n += delta
	s.kv[key] = []byte(strconv.FormatInt(n, 10))
	s.notifyLocked()
	return n, nil
}

func (s *shmMemStore) Wait(ctx context.Context, keys ...string) error { return s.waitFor(ctx, keys...) }

func (s *shmMemStore) CompareSet(_ context.Context, key string, expected, desired []byte) ([]byte, error) {
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

func (s *shmMemStore) Delete(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.kv[key]
	delete(s.kv, key)
	return ok, nil
}

func (s *shmMemStore) NumKeys(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.kv)), nil
}

func (s *shmMemStore) Close() error { return nil }
