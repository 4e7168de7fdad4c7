package trainer

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// nonFiniteRecords hold each non-finite value in each kind of field: a
// train loss, a learning rate, an eval result, a rank's figure.
var nonFiniteRecords = []Record{
	{Kind: KindTrain, Step: 4, Epoch: 0, Loss: 1.5, LR: 0.1, SamplesPerS: 100, AllReduceHiddenPct: 100, ElapsedS: 1},
	{Kind: KindTrain, Step: 6, Epoch: 0, Loss: math.NaN(), LR: math.Inf(1), SamplesPerS: 100, AllReduceHiddenPct: 100, ElapsedS: 2},
	{Kind: KindEpoch, Step: 8, Epoch: 0, Loss: math.Inf(-1), LR: 0.1, SamplesPerS: 100, AllReduceHiddenPct: 100, ElapsedS: 2,
		Ranks: []RankComm{{Rank: 0, HiddenPct: math.NaN(), WaitMs: 0.5, CommMs: math.Inf(1)}}},
	{Kind: KindEval, Step: 8, Epoch: 0, LR: 0.1, AllReduceHiddenPct: 100, ElapsedS: 3,
		Eval: map[string]float64{"loss": math.NaN(), "acc": 0.5}},
}

// sameRecords compares records field by field, NaN equal to NaN.
func sameRecords(t *testing.T, want, got []Record) {
	t.Helper()
	norm := func(rs []Record) string {
		b, err := json.Marshal(rs) // non-finite values as strings: comparable text
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, norm(want), norm(got))
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, math.IsNaN(want[i].Loss), math.IsNaN(got[i].Loss), "record %d", i)
		assert.Equal(t, math.IsInf(want[i].Loss, 0), math.IsInf(got[i].Loss, 0), "record %d", i)
	}
}

// JSON has no NaN or infinity: the metrics log writes them as the strings
// "NaN", "Infinity" and "-Infinity", which any JSON reader parses and
// ReadJSONLines turns back into numbers.
func TestJSONLinesNonFinite(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSONLines(&buf)
	for _, r := range nonFiniteRecords {
		require.NoError(t, j.Log(r), "a non-finite value is a value to record, not an error")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, len(nonFiniteRecords))
	var plain []map[string]any
	for i, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "line %d is JSON: %s", i+1, l)
		plain = append(plain, m)
	}
	assert.Equal(t, 1.5, plain[0]["loss"], "finite values stay numbers")
	assert.Equal(t, "NaN", plain[1]["loss"])
	assert.Equal(t, "Infinity", plain[1]["lr"])
	assert.Equal(t, "-Infinity", plain[2]["loss"])
	assert.Equal(t, "NaN", plain[2]["ranks"].([]any)[0].(map[string]any)["hidden_pct"])
	assert.Equal(t, "Infinity", plain[2]["ranks"].([]any)[0].(map[string]any)["comm_ms"])
	assert.Equal(t, "NaN", plain[3]["eval"].(map[string]any)["loss"])

	got, err := ReadJSONLines(&buf)
	require.NoError(t, err)
	sameRecords(t, nonFiniteRecords, got)
	assert.True(t, math.IsNaN(got[1].Loss))
	assert.True(t, math.IsInf(got[1].LR, 1))
	assert.True(t, math.IsNaN(got[3].Eval["loss"]))

	_, err = ReadJSONLines(strings.NewReader(`{"kind":"train","loss":"lots"}` + "\n"))
	require.ErrorContains(t, err, `line 1`)
	require.ErrorContains(t, err, `"lots"`)
}

// recordJSON and rankCommJSON, through which Record and RankComm are
// written, have the same fields under the same JSON names: a field added
// to Record and not to recordJSON would be left out of every file.
func TestRecordJSONFields(t *testing.T) {
	tags := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			out = append(out, rt.Field(i).Name+" "+rt.Field(i).Tag.Get("json"))
		}
		return out
	}
	assert.Equal(t, tags(Record{}), tags(recordJSON{}))
	assert.Equal(t, tags(RankComm{}), tags(rankCommJSON{}))
}

// CSV writes the same spellings, which Go's ParseFloat, Python's float and
// pandas.read_csv all read.
func TestCSVNonFinite(t *testing.T) {
	var buf bytes.Buffer
	c := NewCSV(&buf, "loss")
	for _, r := range nonFiniteRecords {
		require.NoError(t, c.Log(r))
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+len(nonFiniteRecords))
	assert.Equal(t, []string{"NaN", "Infinity"}, []string{rows[2][3], rows[2][4]}, "loss and lr of the NaN record")
	assert.Equal(t, "-Infinity", rows[3][3])
	assert.Equal(t, "NaN", rows[4][8], "eval_loss")
}

// data.json carries non-finite values as the same strings, and is JSON.
func TestDashboardDataNonFinite(t *testing.T) {
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(t, err)
	defer d.Close()
	for _, r := range nonFiniteRecords {
		require.NoError(t, d.Log(r))
	}
	res, err := http.Get(d.URL() + "data.json")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	require.NotEmpty(t, body, "never an empty 200")
	var dd dashboardData
	require.NoError(t, json.Unmarshal(body, &dd), "data.json is JSON: %s", body)
	sameRecords(t, nonFiniteRecords, dd.Records)
	assert.Contains(t, string(body), `"loss":"NaN"`)
}

// A record the dashboard cannot encode turns data.json into a 500 that
// says why, never a 200 with an empty body (which the page took for a
// lost training process), and training goes on.
func TestDashboardEncodeError(t *testing.T) {
	d, err := NewDashboard("127.0.0.1:0")
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Log(sampleRecords[0]))
	d.encode = func(Record) ([]byte, error) { return nil, errors.New("json: unsupported value: made up") }
	require.NoError(t, d.Log(sampleRecords[1]), "the page's trouble does not stop training")
	res, err := http.Get(d.URL() + "data.json")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, res.StatusCode)
	assert.Contains(t, string(body), "record at step 20")
	assert.Contains(t, string(body), "json: unsupported value: made up")
}

// nanJob is tinyJob whose loss is NaN from the given step on (counting
// from 1), as after a NaN reached the weights.
func nanJob(step int, cbs ...Callback) func(rng *tensor.RNG) (Job, error) {
	return func(rng *tensor.RNG) (Job, error) {
		j, err := tinyJob(cbs...)(rng)
		if err != nil {
			return j, err
		}
		j.Loss = nanLoss(step, nil)
		return j, nil
	}
}

// nanLoss is mse, NaN from its step-th call on when poison says so (nil:
// always). The NaN is added to the loss, so backward stays finite.
func nanLoss(step int, poison func() bool) LossFunc {
	calls := 0
	return func(out *autograd.Variable, b data.Batch) *autograd.Variable {
		calls++
		l := mse(out, b)
		if calls >= step && (poison == nil || poison()) {
			l = autograd.Add(l, autograd.Const(tensor.Full(tensor.Float32, math.NaN(), l.Value.Shape()...)))
		}
		return l
	}
}

// captureStderr sends os.Stderr to a file until the returned function
// gives back what was written.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	old := os.Stderr
	os.Stderr = f
	restore := func() { os.Stderr = old }
	t.Cleanup(restore)
	return func() string {
		restore()
		f.Close()
		b, err := os.ReadFile(f.Name())
		require.NoError(t, err)
		return string(b)
	}
}

// A loss that turns NaN at step 5 of 16 goes through every logger of Main:
// rank 0 says so once on stderr, the JSON lines and CSV files parse with
// the NaN in them, the live page's data.json (read at the last epoch's
// end) stays JSON with the NaN in it, and the run finishes.
func TestMainNaNLoss(t *testing.T) {
	singleProcess(t)
	dir := t.TempDir()
	jsonl, csvPath := filepath.Join(dir, "m.jsonl"), filepath.Join(dir, "m.csv")
	var out bytes.Buffer
	var page dashboardData
	var raw []byte
	look := Funcs{EpochEnd: func(ctx context.Context, tr *Trainer, e EpochInfo) error {
		if e.Epoch != 1 {
			return nil
		}
		m := dashboardURLRe.FindStringSubmatch(out.String())
		require.NotNil(t, m, out.String())
		res, err := http.Get(m[1] + "data.json")
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		raw, err = io.ReadAll(res.Body)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &page), "data.json after the NaN: %q", raw)
		return nil
	}}
	stderr := captureStderr(t)
	rc := Main([]string{"tiny", "-epochs", "2", "-batch-size", "32", "-metrics", jsonl, "-metrics-csv", csvPath,
		"-metrics-every", "2", "-dashboard", "127.0.0.1:0"}, &out, Defaults{}, nanJob(5, look))
	errText := stderr()
	require.Equal(t, 0, rc, "%s\n%s", out.String(), errText)
	assert.Equal(t, 1, strings.Count(errText, "loss is NaN at step 5 (epoch 0)"), "said once, on stderr:\n%s", errText)
	assert.Equal(t, 1, strings.Count(errText, "loss is"), "only the first non-finite loss:\n%s", errText)

	f, err := os.Open(jsonl)
	require.NoError(t, err)
	recs, err := ReadJSONLines(f)
	f.Close()
	require.NoError(t, err)
	var trainSteps []int
	for _, r := range recs {
		if r.Kind != KindTrain {
			continue
		}
		trainSteps = append(trainSteps, r.Step)
		assert.Equal(t, r.Step >= 6, math.IsNaN(r.Loss), "train record at step %d: loss %v", r.Step, r.Loss)
	}
	assert.Equal(t, []int{2, 4, 6, 8, 10, 12, 14, 16}, trainSteps)

	b, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, "loss", rows[0][3])
	assert.Equal(t, []string{"train", "6", "0", "NaN"}, rows[3][:4], "%s", b)

	require.NotEmpty(t, page.Records, "%s", raw)
	assert.Contains(t, string(raw), `"step":6,"epoch":0,"loss":"NaN"`)
	for _, r := range page.Records {
		if r.Kind == KindTrain {
			assert.Equal(t, r.Step >= 6, math.IsNaN(r.Loss), "page record at step %d", r.Step)
		}
	}
}

// -terminate-on-nan fails the run at the first NaN loss, naming the step,
// the epoch and the value.
func TestMainTerminateOnNaN(t *testing.T) {
	singleProcess(t)
	var out bytes.Buffer
	stderr := captureStderr(t)
	rc := Main([]string{"tiny", "-epochs", "2", "-batch-size", "32", "-terminate-on-nan"}, &out, Defaults{}, nanJob(5))
	errText := stderr()
	require.Equal(t, 1, rc, "%s\n%s", out.String(), errText)
	assert.Contains(t, errText, "loss is NaN at step 5 (epoch 0) on rank 0")
	assert.Contains(t, errText, "-terminate-on-nan")
	assert.NotContains(t, out.String(), "[cpu0] Epoch 1 |", "stopped in epoch 0")
}

// Every rank stops at the same step when one rank's loss alone is NaN:
// they agree on an all-reduced flag, so none waits in a collective for a
// rank that left, and all name the rank whose loss it was.
func TestTerminateOnNaNAllRanksAgree(t *testing.T) {
	ctx := context.Background()
	rs := newWorldWith(t, ctx, "", func(r int, pg comm.ProcessGroup, c *Config) {
		c.Loss = nanLoss(3, func() bool { return r == 1 })
		c.Callbacks = []Callback{&TerminateOnNaN{}}
	})
	requireBuilt(t, rs)
	errs := train(ctx, rs, 2)
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		var nf *NonFiniteLossError
		require.True(t, errors.As(err, &nf), "rank %d: %v", r, err)
		assert.Equal(t, [3]int{3, 0, 1}, [3]int{nf.Step, nf.Epoch, nf.Rank}, "rank %d: step, epoch, rank", r)
		assert.True(t, math.IsNaN(nf.Loss))
		assert.Equal(t, 3, rs[r].t.Step(), "rank %d stopped at step 3", r)
		assert.Contains(t, err.Error(), "loss is NaN at step 3 (epoch 0) on rank 1")
	}
}
