package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestDashboardInChromium loads the live page in headless Chromium in the
// middle of a run (from a callback at the end of epoch 1 of 3, while
// training waits) and checks what the page's script drew: the loss
// canvas's point count and last value are those of the train records
// logged so far, which the run's -metrics file holds. The script writes
// them into the canvas's data- attributes after drawing; --dump-dom
// prints the DOM once the page's timers ran (--virtual-time-budget).
func TestDashboardInChromium(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("Debian's chromium is not installed (%v): scripts/setup.sh installs it", err)
	}
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

		cctx, cancel := context.WithTimeout(ctx, 50*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
			"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--disable-dev-shm-usage", "--user-data-dir="+filepath.Join(dir, "chromium-profile"),
			"--virtual-time-budget=4000", "--dump-dom", m[1])
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "chromium: %s", stderr.String())
		dom := stdout.String()
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
