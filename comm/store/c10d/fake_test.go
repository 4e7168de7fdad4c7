package c10d

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeValidated is a stand-in for torch 2.x's servers, written from their
// sources, to exercise the validated dialect here, where only torch 1.13
// runs: VALIDATE must open every connection, then the ops in the validated
// numbering. It tests this client against our reading of torch 2.x, not
// against torch 2.x itself.
type fakeValidated struct {
	l       net.Listener
	libuv   bool // a first request other than VALIDATE is ignored (libuv); else the connection is closed (classic)
	ping    bool // PING is known (torch >= 2.4); else it closes the connection
	refused atomic.Int64

	mu      sync.Mutex
	kv      map[string][]byte
	changed chan struct{} // closed and replaced on every write
	done    chan struct{}
	wg      sync.WaitGroup
}

func startFakeValidated(t *testing.T, libuv, ping bool) *fakeValidated {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeValidated{l: l, libuv: libuv, ping: ping, kv: map[string][]byte{},
		changed: make(chan struct{}), done: make(chan struct{})}
	f.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { f.serve(c) })
		}
	})
	t.Cleanup(func() { close(f.done); l.Close(); f.wg.Wait() })
	return f
}

func (f *fakeValidated) addr() string { return f.l.Addr().String() }

func (f *fakeValidated) write(k string, v []byte) {
	f.kv[k] = v
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeValidated) serve(c net.Conn) {
	defer c.Close()
	go func() { <-f.done; c.Close() }()
	r := bufio.NewReader(c)
	u8 := func() byte { b, err := r.ReadByte(); check(err); return b }
	u32 := func() uint32 {
		var b [4]byte
		_, err := io.ReadFull(r, b[:])
		check(err)
		return binary.LittleEndian.Uint32(b[:])
	}
	u64 := func() uint64 {
		var b [8]byte
		_, err := io.ReadFull(r, b[:])
		check(err)
		return binary.LittleEndian.Uint64(b[:])
	}
	vec := func() []byte {
		n := u64()
		if n > 8<<20 {
			panic(errors.New("too long"))
		}
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		check(err)
		return b
	}
	out := func(b []byte) { _, err := c.Write(b); check(err) }
	i64 := func(n int64) { out(binary.LittleEndian.AppendUint64(nil, uint64(n))) }
	defer func() { _ = recover() }()
	if u8() != opValidate {
		f.refused.Add(1)
		if f.libuv {
			_, _ = io.Copy(io.Discard, r) // ignored for good
		}
		return
	}
	if u32() != validationMagic {
		f.refused.Add(1)
		return
	}
	for {
		op := u8()
		f.mu.Lock()
		switch op {
		case validated.set:
			k, v := string(vec()), vec()
			f.write(k, v)
		case validated.get:
			v, ok := f.kv[string(vec())]
			if !ok && !f.libuv {
				f.mu.Unlock()
				return // classic: tcpStore_.at throws
			}
			out(binary.LittleEndian.AppendUint64(nil, uint64(len(v))))
			out(v)
		case validated.compareSet:
			k, exp, des := string(vec()), vec(), vec()
			cur, ok := f.kv[k]
			switch {
			case !ok && len(exp) == 0:
				f.write(k, des)
				cur = des
			case !ok:
				cur = exp
			case string(cur) == string(exp):
				f.write(k, des)
				cur = des
			}
			out(binary.LittleEndian.AppendUint64(nil, uint64(len(cur))))
			out(cur)
		case validated.add:
			k := string(vec())
			d := int64(u64())
			if v, ok := f.kv[k]; ok {
				n, _ := strconv.ParseInt(string(v), 10, 64)
				d += n
			}
			f.write(k, []byte(strconv.FormatInt(d, 10)))
			i64(d)
		case validated.check, validated.wait:
			keys := make([]string, u64())
			for i := range keys {
				keys[i] = string(vec())
			}
			if op == validated.check {
				out([]byte{map[bool]byte{true: checkReady, false: checkNotReady}[f.has(keys)]})
				break
			}
			for !f.has(keys) {
				ch := f.changed
				f.mu.Unlock()
				select {
				case <-ch:
				case <-f.done:
					return
				}
				f.mu.Lock()
			}
			out([]byte{stopWaiting})
		case validated.numKeys:
			i64(int64(len(f.kv)))
		case validated.del:
			k := string(vec())
			_, ok := f.kv[k]
			delete(f.kv, k)
			i64(map[bool]int64{true: 1, false: 0}[ok])
		case validated.ping:
			if !f.ping {
				f.mu.Unlock()
				return
			}
			out(binary.LittleEndian.AppendUint32(nil, u32()))
		default:
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
}

func (f *fakeValidated) has(keys []string) bool {
	for _, k := range keys {
		if _, ok := f.kv[k]; !ok {
			return false
		}
	}
	return true
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
