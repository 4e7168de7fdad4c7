package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDashboardAddr(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{":8080", "127.0.0.1:8080", ""},
		{"8080", "127.0.0.1:8080", ""},
		{"localhost:0", "localhost:0", ""},
		{"0.0.0.0:9000", "0.0.0.0:9000", ""},
		{"[::1]:9000", "[::1]:9000", ""},
		{"nonsense", "", `trainer: dashboard address "nonsense": want HOST:PORT, :PORT or PORT`},
	} {
		got, err := dashboardAddr(tc.in)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

// data.json hands out the records a page has not seen yet.
func TestDashboardData(t *testing.T) {
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(t, err)
	defer d.Close()
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/$`, d.URL())
	d.SetInfo(DashboardInfo{Name: "job", World: 2, Backend: "shm"})
	for _, r := range sampleRecords {
		require.NoError(t, d.Log(r))
	}
	get := func(since int) dashboardData {
		res, err := http.Get(fmt.Sprintf("%sdata.json?since=%d", d.URL(), since))
		require.NoError(t, err)
		defer res.Body.Close()
		var dd dashboardData
		require.NoError(t, json.NewDecoder(res.Body).Decode(&dd))
		return dd
	}
	all := get(0)
	assert.Equal(t, sampleRecords, all.Records)
	assert.Equal(t, 4, all.Next)
	assert.Equal(t, "shm", all.Info.Backend)
	assert.False(t, all.Done)
	d.Finish()
	rest := get(3)
	assert.Equal(t, sampleRecords[3:], rest.Records)
	assert.True(t, rest.Done)
	assert.Empty(t, get(99).Records)

	res, err := http.Get(d.URL())
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

var (
	dashboardURLRe = regexp.MustCompile(`dashboard: (http://\S+)`)
	canvasRe       = regexp.MustCompile(`<canvas id="(\w+)"[^>]*>`)
	attrRe         = regexp.MustCompile(`(data-[\w-]+)="([^"]*)"`)
)

// canvases returns each canvas's data- attributes from a dumped DOM.
func canvases(dom string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range canvasRe.FindAllStringSubmatch(dom, -1) {
		attrs := map[string]string{}
		for _, a := range attrRe.FindAllStringSubmatch(m[0], -1) {
			attrs[a[1]] = a[2]
		}
		out[m[1]] = attrs
	}
	return out
}

const chromium = "/usr/bin/chromium"

func needChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("Debian's chromium is not installed (%v): scripts/setup-test.sh installs it", err)
	}
}

// dumpDOM loads url in headless Chromium and returns the DOM once the
// page's timers ran (--virtual-time-budget).
func dumpDOM(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+filepath.Join(t.TempDir(), "chromium-profile"),
		"--virtual-time-budget=4000", "--dump-dom", url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium: %s", stderr.String())
	return stdout.String()
}

// The page draws what it can of a run whose loss went NaN and says where:
// data.json's "NaN" and "Infinity" strings become numbers again, the curve
// leaves them out, and a line names the first such record's step. (The
// script's writing into the DOM also shows that the page's
// Content-Security-Policy lets it run.)
func TestDashboardNaNInChromium(t *testing.T) {
	needChromium(t)
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(t, err)
	defer d.Close()
	for _, r := range nonFiniteRecords {
		require.NoError(t, d.Log(r))
	}
	d.Finish()
	dom := dumpDOM(context.Background(), t, d.URL())
	loss := canvases(dom)["loss"]
	require.NotNil(t, loss, "no loss canvas:\n%s", dom)
	assert.Equal(t, "1", loss["data-points"], "the one finite train loss is drawn")
	assert.Equal(t, "2", loss["data-nonfinite"], "the NaN train loss and the -Infinity epoch loss: %v", loss)
	assert.Equal(t, "6", loss["data-nonfinite-step"])
	assert.Contains(t, dom, "loss is NaN at step 6 (epoch 0)")
	assert.Contains(t, dom, "loss=NaN", "the evaluation line")
	assert.Contains(t, dom, "<td>0</td><td>NaN</td><td>0.500</td><td>Infinity</td>", "rank 0's communication row")
	assert.Contains(t, dom, "finished")
}

// TestDashboardInChromium loads the live page in headless Chromium in the
// middle of a run (from a callback at the end of epoch 1 of 3, while
// training waits) and checks what the page's script drew: the loss
// canvas's point count and last value are those of the train records
// logged so far, which the run's -metrics file holds. The script writes
// them into the canvas's data- attributes after drawing; --dump-dom
// prints the DOM once the page's timers ran (--virtual-time-budget).
func TestDashboardInChromium(t *testing.T) {
	needChromium(t)
	singleProcess(t)
	dir := t.TempDir()
	metrics := filepath.Join(dir, "m.jsonl")
	var out bytes.Buffer
	checked := false
	look := Funcs{EpochEnd: func(ctx context.Context, tr *Trainer, e EpochInfo) error {
		if e.Epoch != 1 {
			return nil
		}
		checked = true
		m := dashboardURLRe.FindStringSubmatch(out.String())
		require.NotNil(t, m, "Main printed no dashboard address:\n%s", out.String())
		f, err := os.Open(metrics)
		require.NoError(t, err)
		recs, err := ReadJSONLines(f)
		f.Close()
		require.NoError(t, err)
		var losses []float64
		for _, r := range recs {
			if r.Kind == KindTrain {
				losses = append(losses, r.Loss)
			}
		}
		require.Len(t, losses, 4, "two epochs of two train records each")

		dom := dumpDOM(ctx, t, m[1])
		cv := canvases(dom)
		require.Contains(t, cv, "loss", "no loss canvas in the DOM:\n%s", dom)
		loss := cv["loss"]
		t.Logf("the page drew: loss %v, throughput %v", loss, cv["throughput"])
		assert.Equal(t, strconv.Itoa(len(losses)), loss["data-points"], "the loss curve has the run's points")
		last, err := strconv.ParseFloat(loss["data-last"], 64)
		require.NoError(t, err, "the script drew no last point: %v", loss)
		assert.InEpsilon(t, losses[len(losses)-1], last, 1e-12, "the curve ends at the run's last train loss")
		assert.Equal(t, strconv.Itoa(recs[len(recs)-1].Step), loss["data-last-step"])
		assert.Equal(t, strconv.Itoa(len(losses)), cv["throughput"]["data-points"])
		assert.Regexp(t, `<td>0</td><td>[0-9.]+</td>`, dom, "rank 0's communication row")
		return nil
	}}
	rc := Main([]string{"tiny", "-epochs", "3", "-batch-size", "32", "-metrics", metrics, "-metrics-every", "4",
		"-dashboard", "127.0.0.1:0"}, &out, Defaults{}, tinyJob(look))
	require.Equal(t, 0, rc, out.String())
	require.True(t, checked, "the callback ran at epoch 1")
}

// The page answers requests that name it by a loopback name (any port: an
// ssh tunnel forwards another) or by the host it was bound to, and refuses
// any other Host (a page on another site whose name was pointed at this
// machine, DNS rebinding) with 421 and a message that names the problem;
// every answer carries the security headers.
func TestDashboardHostCheckAndHeaders(t *testing.T) {
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(t, err)
	defer d.Close()
	port := strconv.Itoa(d.ln.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		host, path string
		code       int
	}{
		{"127.0.0.1:" + port, "/", http.StatusOK},
		{"localhost:" + port, "/data.json", http.StatusOK},
		{"LocalHost:" + port, "/dashboard.js", http.StatusOK},
		{"[::1]:9000", "/data.json", http.StatusOK},
		{"localhost", "/", http.StatusOK},
		{"evil.example:" + port, "/data.json", http.StatusMisdirectedRequest},
		{"localhost.evil.example:" + port, "/", http.StatusMisdirectedRequest},
		{"127.0.0.2:" + port, "/data.json", http.StatusMisdirectedRequest},
	} {
		req, err := http.NewRequest("GET", d.URL()+strings.TrimPrefix(tc.path, "/"), nil)
		require.NoError(t, err)
		req.Host = tc.host
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err, tc.host)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, tc.code, res.StatusCode, "%s %s: %s", tc.host, tc.path, body)
		if tc.code != http.StatusOK {
			assert.Contains(t, string(body), fmt.Sprintf("refused Host %q", tc.host))
			assert.Contains(t, string(body), "DNS rebinding")
		}
		h := res.Header
		assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), tc.host)
		assert.Equal(t, "DENY", h.Get("X-Frame-Options"), tc.host)
		assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"), tc.host)
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			assert.Contains(t, csp, want, tc.host)
		}
		assert.NotContains(t, csp, "unsafe-inline")
		if tc.code == http.StatusOK && tc.path == "/data.json" {
			assert.Equal(t, "no-store", h.Get("Cache-Control"))
			assert.Equal(t, "application/json", h.Get("Content-Type"))
		}
	}
}

// The names a page answers to, by what it was bound to.
func TestDashboardHosts(t *testing.T) {
	ifaces := []net.Addr{
		&net.IPNet{IP: net.ParseIP("10.1.2.3"), Mask: net.CIDRMask(8, 32)},
		&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)},
		&net.IPAddr{IP: net.ParseIP("127.0.0.1")},
	}
	loop := []string{"127.0.0.1", "::1", "localhost"}
	for _, tc := range []struct {
		bind string
		want []string
	}{
		{"127.0.0.1", loop},
		{"0.0.0.0", append([]string{"10.1.2.3"}, append(slices.Clone(loop), "fe80::1", "node17")...)},
		{"::", append([]string{"10.1.2.3"}, append(slices.Clone(loop), "fe80::1", "node17")...)},
		{"Node17.Example.", append(slices.Clone(loop), "node17.example")},
		{"10.1.2.3", append([]string{"10.1.2.3"}, loop...)},
	} {
		got := dashboardHosts(tc.bind, ifaces, "Node17")
		want := slices.Clone(tc.want)
		slices.Sort(want)
		assert.Equal(t, want, got, tc.bind)
	}
	d := &Dashboard{hosts: dashboardHosts("0.0.0.0", ifaces, "node17")}
	for host, ok := range map[string]bool{"10.1.2.3:8080": true, "[fe80::1]:8080": true, "node17:8080": true, "NODE17.:8080": true,
		"[0:0:0:0:0:0:0:1]:80": true, "10.1.2.4:8080": false, "node18:8080": false, "": false} {
		assert.Equal(t, ok, d.hostAllowed(host), host)
	}
}
