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
	"strconv"
	"sync"
	"time"
)

//go:embed dashboard
var dashboardFiles embed.FS

// Dashboard is a Logger that serves a live training page over HTTP: the
// loss (train and eval), throughput and per-rank communication figures,
// redrawn as records arrive. The page (HTML and a small canvas plot in
// JavaScript, embedded in the binary: no CDN, nothing fetched from
// elsewhere) polls data.json once a second for the records it has not
// seen. Use it on rank 0: records exist there only (Main's -dashboard
// does this).
type Dashboard struct {
	ln  net.Listener
	srv *http.Server

	mu   sync.Mutex
	info DashboardInfo
	recs []Record
	done bool
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
func NewDashboard(addr string) (*Dashboard, error) {
	bind, err := dashboardAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("trainer: dashboard: %w", err)
	}
	d := &Dashboard{ln: ln}
	static, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("trainer: dashboard: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /data.json", d.serveData)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
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
	d.mu.Lock()
	d.info = info
	d.mu.Unlock()
}

// Log implements Logger.
func (d *Dashboard) Log(r Record) error {
	d.mu.Lock()
	d.recs = append(d.recs, r)
	d.mu.Unlock()
	return nil
}

// Finish marks the run finished: the page stops polling at its next poll.
func (d *Dashboard) Finish() {
	d.mu.Lock()
	d.done = true
	d.mu.Unlock()
}

// Close stops serving (a page still open keeps what it drew).
func (d *Dashboard) Close() error {
	d.Finish()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
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

func (d *Dashboard) serveData(w http.ResponseWriter, r *http.Request) {
	since, _ := strconv.Atoi(r.URL.Query().Get("since"))
	d.mu.Lock()
	since = min(max(since, 0), len(d.recs))
	out := dashboardData{Info: d.info, Records: append([]Record{}, d.recs[since:]...), Next: len(d.recs), Done: d.done}
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}
