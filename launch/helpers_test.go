package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goddp/goddp/comm"
)

// workerBin is testdata/launch/worker, built once by TestMain.
var workerBin string

func TestMain(m *testing.M) {
	if IsChild() {
		os.Exit(RunChild(context.Background(), spawnOK, spawnFail, spawnPanic, spawnStore, spawnAllReduce))
	}
	dir, err := os.MkdirTemp("", "launch-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, "worker")
	out, err := exec.Command("go", "build", "-o", workerBin, "../testdata/launch/worker").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the test worker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a goroutine-safe bytes.Buffer for captured output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// report is one "WORKER {json}" line of the test worker.
type report map[string]any

func (r report) str(k string) string { s, _ := r[k].(string); return s }
func (r report) pid() int            { f, _ := r["pid"].(float64); return int(f) }

func reports(out string, event string) []report {
	var rs []report
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "WORKER ")
		if i < 0 {
			continue
		}
		var r report
		if json.Unmarshal([]byte(line[i+len("WORKER "):]), &r) == nil && (event == "" || r.str("event") == event) {
			rs = append(rs, r)
		}
	}
	return rs
}

// alive reports whether pid still exists (and is not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// testConfig is a single-node config running the test worker.
func testConfig(nproc int, args ...string) (Config, *syncBuffer, *syncBuffer) {
	out, errb := &syncBuffer{}, &syncBuffer{}
	return Config{
		Program: workerBin, Args: args, NProcPerNode: nproc, Standalone: true,
		StopGrace: 2 * time.Second, MonitorInterval: 20 * time.Millisecond,
		Stdout: out, Stderr: errb,
	}, out, errb
}

// memStore is an in-memory comm.Store shared by the launchers of one test.
type memStore struct {
	mu     sync.Mutex
	cond   *sync.Cond
	kv     map[string][]byte
	closed bool
}

func newMemStore() *memStore {
	s := &memStore{kv: map[string][]byte{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// memClient is one connection; closing it does not close the store.
type memClient struct {
	s      *memStore
	closed bool
}

func (c *memClient) check() error {
	if c.closed || c.s.closed {
		return fmt.Errorf("memstore: connection closed")
	}
	return nil
}

func (c *memClient) Set(_ context.Context, k string, v []byte) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if err := c.check(); err != nil {
		return err
	}
	c.s.kv[k] = append([]byte(nil), v...)
	c.s.cond.Broadcast()
	return nil
}

func (c *memClient) Get(ctx context.Context, k string) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { c.s.mu.Lock(); c.s.cond.Broadcast(); c.s.mu.Unlock() })
	defer stop()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for {
		if err := c.check(); err != nil {
			return nil, err
		}
		if v, ok := c.s.kv[k]; ok {
			return v, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.s.cond.Wait()
	}
}

func (c *memClient) Add(_ context.Context, k string, d int64) (int64, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if err := c.check(); err != nil {
		return 0, err
	}
	n, _ := strconv.ParseInt(string(c.s.kv[k]), 10, 64)
	n += d
	c.s.kv[k] = []byte(strconv.FormatInt(n, 10))
	c.s.cond.Broadcast()
	return n, nil
}

func (c *memClient) Wait(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if _, err := c.Get(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

func (c *memClient) CompareSet(_ context.Context, k string, expected, desired []byte) ([]byte, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if err := c.check(); err != nil {
		return nil, err
	}
	cur, ok := c.s.kv[k]
	if (!ok && len(expected) == 0) || (ok && bytes.Equal(cur, expected)) {
		c.s.kv[k] = append([]byte(nil), desired...)
		c.s.cond.Broadcast()
		return desired, nil
	}
	return cur, nil
}

func (c *memClient) Delete(_ context.Context, k string) (bool, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, ok := c.s.kv[k]
	delete(c.s.kv, k)
	return ok, c.check()
}

func (c *memClient) NumKeys(context.Context) (int64, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return int64(len(c.s.kv)), c.check()
}

func (c *memClient) Close() error { c.closed = true; return nil }

// memDriver hosts memStores by address, for multi-node tests in one process.
type memDriver struct {
	mu     sync.Mutex
	stores map[string]*memStore
	port   int
}

func newMemDriver() *memDriver { return &memDriver{stores: map[string]*memStore{}, port: 40000} }

type memServer struct {
	d    *memDriver
	addr string
}

func (s *memServer) Addr() string { return s.addr }

func (s *memServer) Close() error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if st := s.d.stores[s.addr]; st != nil {
		st.mu.Lock()
		st.closed = true
		st.cond.Broadcast()
		st.mu.Unlock()
	}
	delete(s.d.stores, s.addr)
	return nil
}

func (d *memDriver) listen(_ context.Context, addr, _ string) (storeServer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	host, port, _ := net.SplitHostPort(addr)
	if port == "0" {
		d.port++
		addr = net.JoinHostPort(host, strconv.Itoa(d.port))
	}
	if _, used := d.stores[addr]; used {
		return nil, fmt.Errorf("listen tcp %s: bind: address already in use", addr)
	}
	d.stores[addr] = newMemStore()
	return &memServer{d, addr}, nil
}

func (d *memDriver) dial(_ context.Context, addr, _ string) (comm.Store, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stores[addr]
	if st == nil {
		return nil, fmt.Errorf("dial tcp %s: connect: connection refused", addr)
	}
	return &memClient{s: st}, nil
}
