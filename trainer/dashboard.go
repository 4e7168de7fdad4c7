package trainer

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

//go:embed dashboard
var dashboardFiles embed.FS

// The page's limits keep it from hurting the training process it runs in,
// whatever its clients do (issue 43: clients that never read pinned a copy
// of every record each, and idle connections filled rank 0's file table).
const (
	// dashboardMaxConns bounds the page's open connections, far below any
	// file limit (a default soft limit is 1024): a browser opens at most 6
	// per host, so 64 serve a few viewers; the excess is closed at once.
	dashboardMaxConns = 64
	// A request's headers, and the whole request, must arrive within
	// these: the page takes GETs only, a few hundred bytes.
	dashboardReadHeaderTimeout = 5 * time.Second
	dashboardReadTimeout       = 10 * time.Second
	// dashboardWriteTimeout is the time to send one answer: a whole long
	// run's data.json (100,000 records, about 17 MB) through a slow tunnel
	// at 1 MB/s, then a client that stopped reading is cut off.
	dashboardWriteTimeout = 30 * time.Second
	// dashboardIdleTimeout closes a kept-alive connection with no next
	// request; the page asks every second.
	dashboardIdleTimeout = 15 * time.Second
	// dashboardMaxHeaderBytes is far above what a browser sends, far below
	// net/http's 1 MB default.
	dashboardMaxHeaderBytes = 16 << 10
)

// dashboardCSP lets the page load its own script and stylesheet and ask
// for its own data.json, and nothing else (no inline script or style, no
// framing, no forms).
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Dashboard is a Logger that serves a live training page over HTTP: the
// loss (train and eval), throughput and per-rank communication figures,
// redrawn as records arrive. The page (HTML and a small canvas plot in
// JavaScript, embedded in the binary: no CDN, nothing fetched from
// elsewhere) polls data.json once a second for the records it has not
// seen. Use it on rank 0: records exist there only (Main's -dashboard
// does this).
//
// The page is kept apart from training: it serves at most 64 connections
// at a time (more are closed as they arrive), cuts off slow or idle
// clients (timeouts on reading a request, writing an answer and idling),
// encodes each record once into a buffer every client's answer is sliced
// from (a client that never reads holds no copy), answers only requests
// whose Host header names this machine (against DNS rebinding), and sends
// security headers (a Content-Security-Policy, nosniff, no framing, no
// referrer; data.json is never cached).
type Dashboard struct {
	ln    *limitListener
	srv   *http.Server
	hosts []string // host names a request may use (dashboardHosts)

	// encode writes a record's JSON (Record.MarshalJSON; a test swaps it
	// to reach the error path, which Record's encoding never takes).
	encode func(Record) ([]byte, error)

	mu   sync.Mutex // orders Log, SetInfo and Finish
	head []byte     // `{"info":{...},"records":[`
	recs []byte     // every record's JSON, comma-separated; bytes written are never changed
	offs []int      // offs[i]: where record i starts in recs
	done bool
	err  error // the first record that could not be encoded

	snap atomic.Pointer[dashboardSnapshot] // what data.json serves now
}

// dashboardSnapshot is data.json at one moment, shared by every request
// until the next record: read only. An answer for ?since=k is head,
// recs[offs[k]:], tail.
type dashboardSnapshot struct {
	head, recs, tail []byte
	offs             []int
	err              error
}

// DashboardInfo describes the job in the page's heading.
type DashboardInfo struct {
	Name    string `json:"name"`
	World   int    `json:"world"`
	Backend string `json:"backend"`
}

// NewDashboard listens on addr and serves the page from a goroutine until
// Close. An address without a host (":8080", "8080") binds to 127.0.0.1
// only: the page has no authentication, so reaching it from elsewhere
// takes naming the host ("0.0.0.0:8080"). Port 0 picks a free port; URL
// says which.
//
// Requests must name the page by a loopback name (localhost, 127.0.0.1,
// [::1], any port: an ssh tunnel's too), by the host in addr, or, when
// addr's host is 0.0.0.0 or [::], by one of the machine's interface
// addresses (as they were when NewDashboard ran) or its host name; others
// get 421 Misdirected Request.
func NewDashboard(addr string) (*Dashboard, error) {
	bind, err := dashboardAddr(addr)
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		return nil, fmt.Errorf("trainer: dashboard: %w", err)
	}
	host, _, _ := net.SplitHostPort(bind)
	var ifaces []net.Addr
	var hostname string
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		ifaces, _ = net.InterfaceAddrs() // none found: loopback names only
		hostname, _ = os.Hostname()
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("trainer: dashboard: %w", err)
	}
	d := &Dashboard{ln: newLimitListener(ln, dashboardMaxConns), hosts: dashboardHosts(host, ifaces, hostname),
		encode: func(r Record) ([]byte, error) { return r.MarshalJSON() }}
	d.SetInfo(DashboardInfo{})
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /data.json", d.serveData)
	d.srv = &http.Server{Handler: d.guard(mux),
		ReadHeaderTimeout: dashboardReadHeaderTimeout, ReadTimeout: dashboardReadTimeout,
		WriteTimeout: dashboardWriteTimeout, IdleTimeout: dashboardIdleTimeout, MaxHeaderBytes: dashboardMaxHeaderBytes}
	go func() { _ = d.srv.Serve(d.ln) }()
	return d, nil
}

// dashboardAddr is the rule of NewDashboard: loopback unless a host is named.
func dashboardAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if _, perr := strconv.ParseUint(addr, 10, 16); perr != nil {
			return "", fmt.Errorf("trainer: dashboard address %q: want HOST:PORT, :PORT or PORT", addr)
		}
		host, port = "", addr
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// dashboardHosts are the host names a request to a page bound to
// bindHost may carry in its Host header: the loopback names, bindHost,
// and for an unspecified bindHost (0.0.0.0, ::) the interface addresses
// and the host name. A page on another site that points its own name at
// this machine (DNS rebinding) sends its own name, and is refused.
func dashboardHosts(bindHost string, ifaces []net.Addr, hostname string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	ip := net.ParseIP(bindHost)
	switch {
	case ip != nil && ip.IsUnspecified():
		for _, a := range ifaces {
			switch a := a.(type) {
			case *net.IPNet:
				hosts = append(hosts, a.IP.String())
			case *net.IPAddr:
				hosts = append(hosts, a.IP.String())
			}
		}
		if hostname != "" {
			hosts = append(hosts, strings.ToLower(hostname))
		}
	case ip != nil:
		hosts = append(hosts, ip.String())
	case bindHost != "":
		hosts = append(hosts, strings.ToLower(strings.TrimSuffix(bindHost, ".")))
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// hostAllowed reports whether a Host header names the page. The port is
// not compared: a tunnel (ssh -L 9000:localhost:8080) forwards another.
func (d *Dashboard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String() // one spelling per address
	}
	_, ok := slices.BinarySearch(d.hosts, host)
	return ok
}

// guard adds the security headers to every answer and refuses a Host
// that does not name the page.
func (d *Dashboard) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("Referrer-Policy", "no-referrer")
		if !d.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("trainer: dashboard: refused Host %q: the page answers to %s only "+
				"(a page on another site could otherwise read it through DNS rebinding)",
				r.Host, strings.Join(d.hosts, ", ")), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// URL is the page's address.
func (d *Dashboard) URL() string {
	a := d.ln.Addr().(*net.TCPAddr)
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port)) + "/"
}

// SetInfo sets the job's description shown in the heading.
func (d *Dashboard) SetInfo(info DashboardInfo) {
	b, err := json.Marshal(info) // strings and an int: never fails
	if err != nil {
		b = []byte("{}")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.head = append(append([]byte(`{"info":`), b...), `,"records":[`...)
	d.publish()
}

// Log implements Logger. It encodes r once, for every client of the page.
// A record that cannot be encoded turns data.json into a 500 naming it
// (never an empty answer) but does not stop training: it returns nil.
func (d *Dashboard) Log(r Record) error {
	b, err := d.encode(r)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.err == nil {
			d.err = fmt.Errorf("trainer: dashboard: data.json cannot hold the %s record at step %d (epoch %d): %w", r.Kind, r.Step, r.Epoch, err)
		}
	} else {
		if len(d.offs) > 0 {
			d.recs = append(d.recs, ',')
		}
		d.offs = append(d.offs, len(d.recs))
		// Appending writes past every published snapshot's end only, so
		// requests in flight read their bytes unchanged.
		d.recs = append(d.recs, b...)
	}
	d.publish()
	return nil
}

// publish makes the current state what data.json serves; d.mu is held.
func (d *Dashboard) publish() {
	n := len(d.offs)
	tail := fmt.Appendf(nil, `],"next":%d,"done":%t}`+"\n", n, d.done)
	d.snap.Store(&dashboardSnapshot{head: d.head, recs: d.recs[:len(d.recs):len(d.recs)], offs: d.offs[:n:n], tail: tail, err: d.err})
}

// Finish marks the run finished: the page stops polling at its next poll.
func (d *Dashboard) Finish() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done = true
	d.publish()
}

// Close stops serving (a page still open keeps what it drew). Clients
// still being answered after two seconds are cut off.
func (d *Dashboard) Close() error {
	d.Finish()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := d.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = d.srv.Close()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("trainer: dashboard: %w", err)
	}
	return nil
}

// dashboardData is data.json: the records from index Since on, the index
// to ask for next, and whether the run finished.
type dashboardData struct {
	Info    DashboardInfo `json:"info"`
	Records []Record      `json:"records"`
	Next    int           `json:"next"`
	Done    bool          `json:"done"`
}

// serveData answers data.json?since=K from the shared snapshot: three
// writes of bytes every client shares, no copy per request.
func (d *Dashboard) serveData(w http.ResponseWriter, r *http.Request) {
	s := d.snap.Load()
	w.Header().Set("Cache-Control", "no-store")
	if s.err != nil {
		http.Error(w, s.err.Error(), http.StatusInternalServerError)
		return
	}
	since, _ := strconv.Atoi(r.URL.Query().Get("since"))
	since = min(max(since, 0), len(s.offs))
	var recs []byte
	if since < len(s.offs) {
		recs = s.recs[s.offs[since]:]
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(s.head)+len(recs)+len(s.tail)))
	for _, b := range [][]byte{s.head, recs, s.tail} {
		if _, err := w.Write(b); err != nil {
			return // the client left, or stopped reading until WriteTimeout
		}
	}
}
