package store

import (
	"bytes"
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"strconv"
	"sync"
	"time"
)

// storeState is the key-value map behind a Server, shared by its TCP
// connections and by the in-process client of the rank that hosts it.
type storeState struct {
	mu   sync.Mutex
	data map[string]storeEntry
	// waiting indexes blocked waiters by each key they still miss.
	waiting map[string][]*storeWaiter
	// total is what every entry costs (entrySize); maxTotal bounds what
	// remote clients may bring it to (0: no bound).
	total, maxTotal int
	// pending is what the remote clients' waiting gets and waits hold
	// (pendingCost); maxPending bounds it (0: no bound).
	pending, maxPending int
}

// storeEntry is a value and the client whose bytes it counts against
// (nil: the hosting process).
type storeEntry struct {
	v     []byte
	owner *clientQuota
}

// clientQuota is what one remote client holds; guarded by storeState.mu.
type clientQuota struct {
	used, limit int
	who         string
}

func entrySize(key string, v []byte) int { return len(key) + len(v) + entryOverhead }

type storeWaiter struct {
	missing int
	ch      chan struct{}
}

func newStoreState(maxTotal, maxPending int) *storeState {
	return &storeState{data: map[string]storeEntry{}, waiting: map[string][]*storeWaiter{},
		maxTotal: maxTotal, maxPending: maxPending}
}

// pendingCost is what a blocking request holds while it waits.
func pendingCost(keys []string) int {
	n := pendingOverhead
	for _, k := range keys {
		n += len(k)
	}
	return n
}

// hold counts the blocking request req of client q, which is about to
// wait, against q's limit and the store's limit on waiting requests, or
// refuses it. unhold gives back what hold returned once it has been answered.
func (s *storeState) hold(req *storeRequest, q *clientQuota) (int, error) {
	cost := pendingCost(req.Keys)
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.used+cost > q.limit {
		return 0, &errQuota{fmt.Sprintf("client %s holds %d bytes; a blocking %s of %d keys (%d bytes while it waits) would pass its limit of %d (GODDP_STORE_MAX_CLIENT_BYTES)",
			q.who, q.used, req.Op, len(req.Keys), cost, q.limit)}
	}
	if s.maxPending > 0 && s.pending+cost > s.maxPending {
		return 0, &errQuota{fmt.Sprintf("the store's waiting gets and waits hold %d bytes; a blocking %s of %d keys (%d bytes) would pass their limit of %d (GODDP_STORE_MAX_PENDING_BYTES)",
			s.pending, req.Op, len(req.Keys), cost, s.maxPending)}
	}
	q.used += cost
	s.pending += cost
	return cost, nil
}

func (s *storeState) unhold(q *clientQuota, cost int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q.used -= cost
	s.pending -= cost
}

// errQuota is a set that would pass a client's or the store's byte limit.
type errQuota struct{ msg string }

func (e *errQuota) Error() string { return e.msg }

// put stores v (owned by the state from now on) for q and wakes waiters,
// or refuses when q would pass its limit or the store its own; s.mu held.
func (s *storeState) put(key string, v []byte, q *clientQuota) error {
	old, had := s.data[key]
	size, oldSize := entrySize(key, v), 0
	if had {
		oldSize = entrySize(key, old.v)
	}
	if q != nil {
		mine := 0
		if had && old.owner == q {
			mine = oldSize
		}
		if q.used-mine+size > q.limit {
			return &errQuota{fmt.Sprintf("client %s holds %d bytes; setting %q (%d bytes) would pass its limit of %d (GODDP_STORE_MAX_CLIENT_BYTES)",
				q.who, q.used, trimForLog([]byte(key)), len(v), q.limit)}
		}
		if s.maxTotal > 0 && s.total-oldSize+size > s.maxTotal {
			return &errQuota{fmt.Sprintf("the store holds %d bytes; setting %q (%d bytes) would pass its limit of %d (GODDP_STORE_MAX_BYTES)",
				s.total, trimForLog([]byte(key)), len(v), s.maxTotal)}
		}
	}
	s.release(key, old, had)
	s.data[key] = storeEntry{v: v, owner: q}
	s.total += size
	if q != nil {
		q.used += size
	}
	if had {
		return nil
	}
	for _, w := range s.waiting[key] {
		if w.missing--; w.missing == 0 {
			close(w.ch)
		}
	}
	delete(s.waiting, key)
	return nil
}

// release uncounts key's entry e (if had); s.mu held.
func (s *storeState) release(key string, e storeEntry, had bool) {
	if !had {
		return
	}
	size := entrySize(key, e.v)
	s.total -= size
	if e.owner != nil {
		e.owner.used -= size
	}
}

// failed is the response to a refused request.
func failed(id uint64, err error) storeResponse {
	return storeResponse{ID: id, Status: statusFailed, Value: []byte(err.Error())}
}

// apply runs a non-blocking request for client q (nil: the hosting
// process, never limited). For get and wait it only checks: the caller
// blocks with waitFor when the response says statusTimeout.
func (s *storeState) apply(req *storeRequest, q *clientQuota) storeResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := storeResponse{ID: req.ID}
	switch req.Op {
	case opSet:
		if err := s.put(req.Keys[0], bytes.Clone(req.Value), q); err != nil {
			return failed(req.ID, err)
		}
	case opGet:
		e, ok := s.data[req.Keys[0]]
		if !ok {
			resp.Status = statusTimeout
		}
		resp.Value = e.v
	case opAdd:
		cur := int64(0)
		if e, ok := s.data[req.Keys[0]]; ok {
			v := e.v
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return storeResponse{ID: req.ID, Status: statusFailed,
					Value: fmt.Appendf(nil, "add: key %q holds %q, not an integer", req.Keys[0], trimForLog(v))}
			}
			cur = n
		}
		cur += req.Delta
		if err := s.put(req.Keys[0], strconv.AppendInt(nil, cur, 10), q); err != nil {
			return failed(req.ID, err)
		}
		resp.Int = cur
	case opWait, opCheck:
		resp.Int = 1
		for _, k := range req.Keys {
			if _, ok := s.data[k]; !ok {
				resp.Int = 0
				if req.Op == opWait {
					resp.Status = statusTimeout
				}
				break
			}
		}
	case opCompareSet:
		k := req.Keys[0]
		e, ok := s.data[k]
		v := e.v
		switch {
		case !ok && len(req.Expected) == 0, ok && bytes.Equal(v, req.Expected):
			v = bytes.Clone(req.Value)
			if err := s.put(k, v, q); err != nil {
				return failed(req.ID, err)
			}
		}
		resp.Value = v
	case opDelete:
		if e, ok := s.data[req.Keys[0]]; ok {
			s.release(req.Keys[0], e, true)
			delete(s.data, req.Keys[0])
			resp.Int = 1
		}
	case opNumKeys:
		resp.Int = int64(len(s.data))
	case opPing:
	default:
		resp.Status = statusBadRequest
		resp.Value = fmt.Appendf(nil, "unknown op %v", req.Op)
	}
	return resp
}

// waitFor returns a channel closed once every key exists (nil if they all
// do already) and a cancel func that unregisters it.
func (s *storeState) waitFor(keys []string) (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &storeWaiter{ch: make(chan struct{})}
	var missing []string
	for _, k := range keys {
		if _, ok := s.data[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil, func() {}
	}
	for _, k := range missing {
		// A key listed twice counts once per listing, so dedupe by the index.
		if l := s.waiting[k]; len(l) > 0 && l[len(l)-1] == w {
			continue
		}
		w.missing++
		s.waiting[k] = append(s.waiting[k], w)
	}
	cancel := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, k := range missing {
			l := s.waiting[k]
			for i, x := range l {
				if x == w {
					l = append(l[:i], l[i+1:]...)
					break
				}
			}
			if len(l) == 0 {
				delete(s.waiting, k)
			} else {
				s.waiting[k] = l
			}
		}
	}
	return w.ch, cancel
}

// serve answers req, blocking up to req.Timeout for get and wait, or until
// either done channel closes (connection gone, store closed, ctx ended).
func (s *storeState) serve(req *storeRequest, q *clientQuota, done1, done2 <-chan struct{}) storeResponse {
	resp := s.apply(req, q)
	if resp.Status != statusTimeout || req.Timeout <= 0 {
		return resp
	}
	timer := time.NewTimer(req.Timeout)
	defer timer.Stop()
	for {
		ch, cancel := s.waitFor(req.Keys)
		if ch != nil {
			select {
			case <-ch:
			case <-timer.C:
				cancel()
				return storeResponse{ID: req.ID, Status: statusTimeout}
			case <-done1:
				cancel()
				return storeResponse{ID: req.ID, Status: statusFailed, Value: []byte("store closed")}
			case <-done2:
				cancel()
				return storeResponse{ID: req.ID, Status: statusFailed, Value: []byte("store closed")}
			}
		}
		// The keys existed at some point; a delete in between sends us back.
		if resp = s.apply(req, q); resp.Status != statusTimeout {
			return resp
		}
	}
}

// localStore is the in-process client of a hosted store: no socket, same semantics.
type localStore struct {
	state   *storeState
	timeout time.Duration
	done    <-chan struct{}
}

func (l *localStore) call(ctx context.Context, req storeRequest) (storeResponse, error) {
	if err := ctx.Err(); err != nil {
		return storeResponse{}, err
	}
	if req.Op == opGet || req.Op == opWait {
		req.Timeout = effectiveTimeout(ctx, l.timeout)
		resp := l.state.serve(&req, nil, ctx.Done(), l.done)
		if resp.Status == statusFailed && ctx.Err() != nil {
			return resp, ctx.Err()
		}
		return resp, nil
	}
	return l.state.apply(&req, nil), nil
}

func (l *localStore) Set(ctx context.Context, key string, value []byte) error {
	_, err := storeDo(ctx, l.call, storeRequest{Op: opSet, Keys: []string{key}, Value: value}, "")
	return err
}

func (l *localStore) Get(ctx context.Context, key string) ([]byte, error) {
	r, err := storeDo(ctx, l.call, storeRequest{Op: opGet, Keys: []string{key}}, "")
	return r.Value, err
}

func (l *localStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	r, err := storeDo(ctx, l.call, storeRequest{Op: opAdd, Keys: []string{key}, Delta: delta}, "")
	return r.Int, err
}

func (l *localStore) Wait(ctx context.Context, keys ...string) error {
	_, err := storeDo(ctx, l.call, storeRequest{Op: opWait, Keys: keys}, "")
	return err
}

func (l *localStore) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	r, err := storeDo(ctx, l.call, storeRequest{Op: opCompareSet, Keys: []string{key}, Expected: expected, Value: desired}, "")
	return r.Value, err
}

func (l *localStore) Delete(ctx context.Context, key string) (bool, error) {
	r, err := storeDo(ctx, l.call, storeRequest{Op: opDelete, Keys: []string{key}}, "")
	return r.Int == 1, err
}

func (l *localStore) NumKeys(ctx context.Context) (int64, error) {
	r, err := storeDo(ctx, l.call, storeRequest{Op: opNumKeys}, "")
	return r.Int, err
}

func (l *localStore) Close() error { return nil }

// storeDo runs req through call and turns non-OK statuses into errors.
func storeDo(ctx context.Context, call func(context.Context, storeRequest) (storeResponse, error),
	req storeRequest, where string) (storeResponse, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	for _, k := range req.Keys {
		if len(k) > maxStoreKey {
			return storeResponse{}, fmt.Errorf("%w: store key of %d bytes exceeds %d", backend.ErrBadArgument, len(k), maxStoreKey)
		}
	}
	if len(req.Value)+len(req.Expected)+len(req.Keys)*8 > maxStoreFrame-1024 {
		return storeResponse{}, fmt.Errorf("%w: store value of %d bytes is too large", backend.ErrBadArgument, len(req.Value))
	}
	start := time.Now()
	resp, err := call(ctx, req)
	if err != nil {
		return resp, err
	}
	switch resp.Status {
	case statusOK:
		return resp, nil
	case statusTimeout:
		// call sets the request's timeout on its own copy; what the caller
		// needs is how long it actually waited.
		return resp, fmt.Errorf("%w: store%s %s %s after %v", backend.ErrTimeout, where, req.Op, keyList(req.Keys),
			time.Since(start).Round(time.Millisecond))
	default:
		return resp, fmt.Errorf("comm: store%s %s %s: %s", where, req.Op, keyList(req.Keys), resp.Value)
	}
}

func keyList(keys []string) string {
	const show = 4
	shown := make([]string, 0, min(len(keys), show))
	for _, k := range keys[:min(len(keys), show)] {
		shown = append(shown, string(trimForLog([]byte(k))))
	}
	if len(keys) > show {
		return fmt.Sprintf("%q and %d more", shown, len(keys)-show)
	}
	return fmt.Sprintf("%q", shown)
}

// effectiveTimeout is the store timeout shortened to ctx's deadline.
func effectiveTimeout(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < d {
			d = max(left, time.Millisecond)
		}
	}
	return d
}

// trimForLog shortens a value for an error message.
func trimForLog(v []byte) []byte {
	if len(v) > 32 {
		return append(bytes.Clone(v[:32]), "..."...)
	}
	return v
}
