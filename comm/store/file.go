package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/wire"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// fileStore is a Store in one file shared by processes on a shared file
// system (torch's FileStore). The file is an append-only log of records,
//
//	kind u8 (1 set, 2 delete) | key (u32 length + bytes) | value (u32 length + bytes)
//
// and every operation takes flock(LOCK_EX), reads the records appended since
// its last visit, applies its change by appending, and unlocks. A record torn
// by a crash mid-append is cut off by the next writer. Blocking gets poll.
type fileStore struct {
	path    string
	timeout time.Duration

	mu   sync.Mutex // flock is per open file, so goroutines serialise here first
	f    *os.File
	off  int64
	data map[string][]byte
}

const (
	fileRecSet byte = 1
	fileRecDel byte = 2
)

// NewFile opens (creating it if needed) the store file at path. Use a
// fresh path per job: keys left by an earlier run would confuse rendezvous.
func NewFile(path string, opts ...Option) (backend.Store, error) {
	cfg := newStoreConfig(opts)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("comm: file store: %w", err)
	}
	return &fileStore{path: path, timeout: cfg.timeout, f: f, data: map[string][]byte{}}, nil
}

// locked runs fn with the file locked and the in-memory map up to date.
func (s *fileStore) locked(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return fmt.Errorf("%w: file store %s", backend.ErrClosed, s.path)
	}
	fd := int(s.f.Fd())
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("comm: file store %s: flock: %w", s.path, err)
		}
	}
	defer syscall.Flock(fd, syscall.LOCK_UN)
	if err := s.catchUp(); err != nil {
		return err
	}
	return fn()
}

// catchUp applies the records appended since the last visit; lock held.
func (s *fileStore) catchUp() error {
	st, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("comm: file store %s: %w", s.path, err)
	}
	if st.Size() < s.off {
		return fmt.Errorf("comm: file store %s shrank under us (was it reused by another job?)", s.path)
	}
	if st.Size() == s.off {
		return nil
	}
	buf := make([]byte, st.Size()-s.off)
	if _, err := s.f.ReadAt(buf, s.off); err != nil {
		return fmt.Errorf("comm: file store %s: %w", s.path, err)
	}
	good := applyFileRecords(buf, s.data)
	if good < len(buf) {
		// A torn record from a writer that died mid-append: drop it.
		if err := s.f.Truncate(s.off + int64(good)); err != nil {
			return fmt.Errorf("comm: file store %s: %w", s.path, err)
		}
	}
	s.off += int64(good)
	return nil
}

// applyFileRecords applies the complete records at the start of b to data
// and returns how many bytes they took.
func applyFileRecords(b []byte, data map[string][]byte) int {
	off := 0
	for {
		d := wire.Decoder{B: b[off:]}
		kind := d.U8()
		key := d.Bytes()
		val := d.Bytes()
		if d.Err != nil || (kind != fileRecSet && kind != fileRecDel) {
			return off
		}
		switch kind {
		case fileRecSet:
			data[string(key)] = bytes.Clone(val)
		case fileRecDel:
			delete(data, string(key))
		}
		off = len(b) - d.Remaining()
	}
}

// appendRecord writes a record at the end of the log; lock held.
func (s *fileStore) appendRecord(kind byte, key string, val []byte) error {
	rec := []byte{kind}
	rec = wire.AppendBytes(rec, []byte(key))
	rec = wire.AppendBytes(rec, val)
	if _, err := s.f.WriteAt(rec, s.off); err != nil {
		return fmt.Errorf("comm: file store %s: %w", s.path, err)
	}
	s.off += int64(len(rec))
	switch kind {
	case fileRecSet:
		s.data[key] = bytes.Clone(val)
	case fileRecDel:
		delete(s.data, key)
	}
	return nil
}

func (s *fileStore) Set(ctx context.Context, key string, value []byte) error {
	return s.locked(func() error { return s.appendRecord(fileRecSet, key, value) })
}

// poll retries check under the lock until it reports done, ctx ends or the timeout passes.
func (s *fileStore) poll(ctx context.Context, what string, check func() bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	timeout := effectiveTimeout(ctx, s.timeout)
	deadline := time.Now().Add(timeout)
	backoff := time.Millisecond
	for {
		var ok bool
		if err := s.locked(func() error { ok = check(); return nil }); err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: file store %s: %s after %v", backend.ErrTimeout, s.path, what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

func (s *fileStore) Get(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.poll(ctx, fmt.Sprintf("get %q", key), func() bool {
		var ok bool
		v, ok = s.data[key]
		return ok
	})
	return bytes.Clone(v), err
}

func (s *fileStore) Wait(ctx context.Context, keys ...string) error {
	return s.poll(ctx, "wait "+keyList(keys), func() bool {
		for _, k := range keys {
			if _, ok := s.data[k]; !ok {
				return false
			}
		}
		return true
	})
}

func (s *fileStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	var cur int64
	err := s.locked(func() error {
		if v, ok := s.data[key]; ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("comm: file store add: key %q holds %q, not an integer", key, trimForLog(v))
			}
			cur = n
		}
		cur += delta
		return s.appendRecord(fileRecSet, key, strconv.AppendInt(nil, cur, 10))
	})
	return cur, err
}

func (s *fileStore) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	var out []byte
	err := s.locked(func() error {
		v, ok := s.data[key]
		if (!ok && len(expected) == 0) || (ok && bytes.Equal(v, expected)) {
			if err := s.appendRecord(fileRecSet, key, desired); err != nil {
				return err
			}
			v = desired
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

func (s *fileStore) Delete(ctx context.Context, key string) (bool, error) {
	var had bool
	err := s.locked(func() error {
		if _, had = s.data[key]; had {
			return s.appendRecord(fileRecDel, key, nil)
		}
		return nil
	})
	return had, err
}

func (s *fileStore) NumKeys(ctx context.Context) (int64, error) {
	var n int64
	err := s.locked(func() error { n = int64(len(s.data)); return nil })
	return n, err
}

func (s *fileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
