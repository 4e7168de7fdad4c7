package launch

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordIn writes err's record to a fresh error file the way a worker does
// under a launcher (RANK and LOCAL_RANK set) and returns its path.
func recordIn(t *testing.T, err error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "error.json")
	t.Setenv(EnvErrorFile, "")
	t.Setenv(EnvTorchErrorFile, path)
	t.Setenv(EnvRank, "3")
	t.Setenv(EnvLocalRank, "1")
	require.NoError(t, RecordError(err))
	return path
}

// TestErrorFileShape: the file has torchelastic's shape, the one
// ErrorHandler.record_exception writes: {"message": {"message": ...,
// "extraInfo": {"timestamp": "<integer seconds>"}}}.
func TestErrorFileShape(t *testing.T) {
	before := time.Now().Unix()
	path := recordIn(t, errors.New("loss is NaN at step 7"))
	after := time.Now().Unix()

	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(readErrorFileBytes(t, path), &top))
	require.Len(t, top, 1, "only \"message\" at the top, as torch writes")
	var msg struct {
		Message   string            `json:"message"`
		ExtraInfo map[string]string `json:"extraInfo"`
	}
	require.NoError(t, json.Unmarshal(top["message"], &msg), "message is an object, as torch writes")
	require.Equal(t, "loss is NaN at step 7", msg.Message)
	ts, err := strconv.ParseInt(msg.ExtraInfo["timestamp"], 10, 64)
	require.NoError(t, err, "timestamp must be integer seconds, as torch's int() reads it")
	require.True(t, ts >= before && ts <= after, "timestamp %d outside [%d, %d]", ts, before, after)
	require.NotContains(t, msg.ExtraInfo, "py_callstack", "no stack: torch shows the message")
}

// TestErrorFileRoundTrip: ReadErrorFile gives back what RecordError and
// RecordPanic wrote.
func TestErrorFileRoundTrip(t *testing.T) {
	path := recordIn(t, errors.New("two\nlines"))
	rec, err := ReadErrorFile(path)
	require.NoError(t, err)
	require.Equal(t, "two\nlines", rec.Message)
	require.Equal(t, 3, rec.Rank)
	require.Equal(t, 1, rec.LocalRank)
	require.Positive(t, rec.PID)
	require.WithinDuration(t, time.Now(), rec.Time, 5*time.Second)
	require.Empty(t, rec.Stack)

	func() {
		defer func() { require.Equal(t, "boom", recover()) }()
		defer RecordPanic()
		panic("boom")
	}()
	rec, err = ReadErrorFile(path)
	require.NoError(t, err)
	require.Equal(t, "panic: boom", rec.Message)
	require.Contains(t, rec.Stack, "goroutine ")
	require.NotContains(t, rec.Stack, "panic: boom", "the stack alone, without the message torch shows above it")

	// A record travels between launchers inside WorkerFailure's JSON.
	b, err := json.Marshal(WorkerFailure{Rank: 3, Record: rec})
	require.NoError(t, err)
	var f WorkerFailure
	require.NoError(t, json.Unmarshal(b, &f))
	require.Equal(t, rec.Message, f.Record.Message)
	require.Equal(t, rec.Stack, f.Record.Stack)
	require.Equal(t, rec.Time.Unix(), f.Record.Time.Unix())
}

// TestReadOtherErrorFiles: the records other writers leave are read too.
func TestReadOtherErrorFiles(t *testing.T) {
	for _, tc := range []struct {
		name, file, message, stack string
		time                       int64
	}{
		{"torch's record_exception",
			`{"message": {"message": "RuntimeError: CUDA out of memory", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"train.py\", line 1\nRuntimeError: CUDA out of memory\n", "timestamp": "1732590375"}}}`,
			"RuntimeError: CUDA out of memory", "Traceback (most recent call last):\n  File \"train.py\", line 1\nRuntimeError: CUDA out of memory\n", 1732590375},
		{"torchrun's copy with an error code",
			`{"message": {"message": "x", "extraInfo": {"timestamp": "5"}, "errorCode": -9}}`, "x", "", 5},
		{"a plain message with a timestamp",
			`{"message": "killed by the scheduler", "timestamp": 1732590375}`, "killed by the scheduler", "", 1732590375},
		{"goddp's earlier format",
			`{"message": "m", "rank": 2, "local_rank": 0, "pid": 9, "timestamp": "2026-11-26T03:06:15.019654919Z", "stack": "s"}`,
			"m", "s", 1795662375},
		{"not JSON", "segfault\n", "segfault\n", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "error.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o600))
			rec, err := ReadErrorFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.message, rec.Message)
			require.Equal(t, tc.stack, rec.Stack)
			if tc.time == 0 {
				require.True(t, rec.Time.IsZero())
			} else {
				require.Equal(t, tc.time, rec.Time.Unix())
			}
		})
	}
}

// TestTorchReadsErrorFile: torchelastic's own reader (ProcessFailure, and
// the failure summary torchrun prints) takes goddp's file: the message,
// the integer timestamp and the rank, and no traceback of its own.
func TestTorchReadsErrorFile(t *testing.T) {
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import torch.distributed.elastic.multiprocessing.errors").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import torch's elastic errors: %v: %s", python, err, out)
	}
	before := time.Now().Unix()
	path := recordIn(t, errors.New("comm: rank 3: loss is NaN at step 7"))
	script := `
import sys
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
f = ProcessFailure(local_rank=1, pid=4242, exitcode=1, error_file=sys.argv[1])
print("timestamp=%d" % f.timestamp)
print(ChildFailedError("linear", {3: f}).format_msg())
`
	out, err := exec.Command(python, "-c", script, path).CombinedOutput()
	require.NoError(t, err, "torch could not read goddp's error file:\n%s", out)
	s := string(out)
	ts, err := strconv.ParseInt(strings.TrimPrefix(strings.Split(s, "\n")[0], "timestamp="), 10, 64)
	require.NoError(t, err, s)
	require.GreaterOrEqual(t, ts, before)
	require.Contains(t, s, "rank      : 3 (local_rank: 1)")
	require.Contains(t, s, "traceback : comm: rank 3: loss is NaN at step 7\n")
	require.NotContains(t, s, "Traceback")
}

func readErrorFileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
