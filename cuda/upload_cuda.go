//go:build cuda

package cuda

import (
	"errors"
	"sync"
	"unsafe"
)

// uploader makes host-to-device copies asynchronous: the caller's bytes
// are copied into pinned memory (so the caller may reuse them when htod
// returns, as tensor.Device.Upload promises) and the DMA from there is
// enqueued on the stream with an event after it; the host does not wait
// for the stream. A chunk is reused once its event has completed, which
// is asked without waiting (cuEventQuery); only when the chunks in flight
// pass maxPinned does an upload wait for the oldest, and never under mu.
type uploader struct {
	calls uploadCalls
	max   int64 // pinned bytes in flight before an upload waits

	mu      sync.Mutex
	free    []*chunk // completed, reusable
	pending []*chunk // in stream order
	lost    []*chunk // copies queued without an event: never reused, freed at close
	bytes   int64    // pinned bytes held (free and pending)
}

// uploadCalls is what the uploader needs of the driver (dlDevice; the
// tests use a fake).
type uploadCalls interface {
	hostAlloc(n int64) (unsafe.Pointer, error)
	hostFree(p unsafe.Pointer) error
	newEvent() (unsafe.Pointer, error)
	destroyEvent(e unsafe.Pointer) error
	// recordCompute records e on the compute stream.
	recordCompute(e unsafe.Pointer) error
	// queryEvent reports whether e has completed, without waiting.
	queryEvent(e unsafe.Pointer) (bool, error)
	syncEvent(e unsafe.Pointer) error
	// htodCompute enqueues the copy from pinned src on the compute stream.
	htodCompute(dst uint64, src unsafe.Pointer, n int64) error
}

type chunk struct {
	p  unsafe.Pointer
	n  int64
	ev unsafe.Pointer
}

// maxPinned bounds the staging in flight: uploads wait beyond it.
const maxPinned = 256 << 20

// htod copies n bytes at src to dst after the work queued on the compute
// stream, and returns without waiting for it.
func (u *uploader) htod(dst uint64, src unsafe.Pointer, n int64) error {
	c, err := u.take(n)
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(c.p), n), unsafe.Slice((*byte)(src), n))
	if err := u.calls.htodCompute(dst, c.p, n); err != nil {
		u.put(c, false)
		return err
	}
	if err := u.calls.recordCompute(c.ev); err != nil {
		// The copy is queued but not watchable: wait for it here.
		u.put(c, false)
		return err
	}
	u.put(c, true)
	return nil
}

// take returns a chunk of at least n bytes whose last copy has completed.
func (u *uploader) take(n int64) (*chunk, error) {
	for {
		u.mu.Lock()
		if err := u.reapLocked(); err != nil {
			u.mu.Unlock()
			return nil, err
		}
		for i, c := range u.free {
			if c.n >= n {
				u.free = append(u.free[:i], u.free[i+1:]...)
				u.mu.Unlock()
				return c, nil
			}
		}
		if u.bytes+n <= u.max || len(u.pending) == 0 {
			// Room for a new chunk; drop the free ones too small to serve.
			var small []*chunk
			small, u.free = u.free, nil
			for _, c := range small {
				u.bytes -= c.n
			}
			u.bytes += n
			u.mu.Unlock()
			var errs []error
			for _, c := range small {
				errs = append(errs, u.calls.hostFree(c.p), u.calls.destroyEvent(c.ev))
			}
			c, err := u.alloc(n)
			if err != nil {
				u.mu.Lock()
				u.bytes -= n
				u.mu.Unlock()
				return nil, errors.Join(append(errs, err)...)
			}
			return c, errors.Join(errs...)
		}
		oldest := u.pending[0]
		u.mu.Unlock()
		// Too much in flight: wait for the oldest copy, without mu.
		if err := u.calls.syncEvent(oldest.ev); err != nil {
			return nil, err
		}
	}
}

func (u *uploader) alloc(n int64) (*chunk, error) {
	p, err := u.calls.hostAlloc(n)
	if err != nil {
		return nil, err
	}
	ev, err := u.calls.newEvent()
	if err != nil {
		return nil, errors.Join(err, u.calls.hostFree(p))
	}
	return &chunk{p: p, n: n, ev: ev}, nil
}

// reapLocked moves the completed pending chunks to free (in stream order,
// so the first not completed ends the scan).
func (u *uploader) reapLocked() error {
	for len(u.pending) > 0 {
		done, err := u.calls.queryEvent(u.pending[0].ev)
		if err != nil {
			return err
		}
		if !done {
			return nil
		}
		u.free = append(u.free, u.pending[0])
		u.pending = u.pending[1:]
	}
	return nil
}

// put returns c: pending behind its event when inFlight; otherwise the
// stream may still read it with no event to ask, so it is never reused
// (close frees it).
func (u *uploader) put(c *chunk, inFlight bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if inFlight {
		u.pending = append(u.pending, c)
		return
	}
	u.lost = append(u.lost, c)
}

// close frees every chunk; the stream must be idle (Context.Close has
// synchronised it).
func (u *uploader) close() error {
	u.mu.Lock()
	cs := append(append(append([]*chunk(nil), u.free...), u.pending...), u.lost...)
	u.free, u.pending, u.lost, u.bytes = nil, nil, nil, 0
	u.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, u.calls.hostFree(c.p), u.calls.destroyEvent(c.ev))
	}
	return errors.Join(errs...)
}
