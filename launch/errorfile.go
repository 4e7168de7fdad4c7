package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// ErrorRecord is what a worker writes to $GODDP_ERROR_FILE (the same path
// is exported as TORCHELASTIC_ERROR_FILE) so that the launcher can show the
// real cause of a failure rather than only an exit code. On disk it is
// torchelastic's error file, the JSON torch's ErrorHandler.record_exception
// writes, so that torchrun's failure summary shows it too:
//
//	{"message": {"message": MESSAGE,
//	             "extraInfo": {"timestamp": "<integer seconds>", "py_callstack": STACK,
//	                           "rank": "3", "local_rank": "1", "pid": "4242"}}}
//
// torch reads the timestamp with int() and shows py_callstack, when there
// is one, in place of the message; so py_callstack is written only for a
// panic (the message, then the goroutine stacks), and the rank and pid ride
// along in extraInfo, which torch does not read. ReadErrorFile also takes
// torch's other forms and goddp's earlier flat one.
type ErrorRecord struct {
	Message   string
	Rank      int // -1 when unknown
	LocalRank int // -1 when unknown
	PID       int
	Time      time.Time // whole seconds on disk, as torch writes it
	Stack     string
}

// torchError is torchelastic's error file.
type torchError struct {
	Message torchMessage `json:"message"`
}

type torchMessage struct {
	Message   string     `json:"message"`
	ExtraInfo torchExtra `json:"extraInfo"`
}

type torchExtra struct {
	PyCallstack string `json:"py_callstack,omitempty"`
	Timestamp   string `json:"timestamp"`
	Rank        string `json:"rank,omitempty"`
	LocalRank   string `json:"local_rank,omitempty"`
	PID         string `json:"pid,omitempty"`
}

// MarshalJSON writes torchelastic's error file (see ErrorRecord).
func (r ErrorRecord) MarshalJSON() ([]byte, error) {
	var ts int64
	if !r.Time.IsZero() {
		ts = r.Time.Unix()
	}
	x := torchExtra{Timestamp: strconv.FormatInt(ts, 10), Rank: known(r.Rank), LocalRank: known(r.LocalRank)}
	if r.PID > 0 {
		x.PID = strconv.Itoa(r.PID)
	}
	if r.Stack != "" {
		x.PyCallstack = r.Message + "\n\n" + r.Stack
	}
	return json.Marshal(torchError{Message: torchMessage{Message: r.Message, ExtraInfo: x}})
}

func known(n int) string {
	if n < 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// UnmarshalJSON reads torchelastic's error file, in the object form
// record_exception writes or the plain {"message": TEXT, "timestamp": N}
// one, and goddp's earlier flat form (an RFC 3339 timestamp).
func (r *ErrorRecord) UnmarshalJSON(b []byte) error {
	var top struct {
		Message   json.RawMessage `json:"message"`
		Timestamp json.RawMessage `json:"timestamp"`
		Rank      *int            `json:"rank"`
		LocalRank *int            `json:"local_rank"`
		PID       int             `json:"pid"`
		Stack     string          `json:"stack"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return err
	}
	*r = ErrorRecord{Rank: -1, LocalRank: -1, PID: top.PID, Stack: top.Stack}
	if top.Rank != nil {
		r.Rank = *top.Rank
	}
	if top.LocalRank != nil {
		r.LocalRank = *top.LocalRank
	}
	if err := json.Unmarshal(top.Message, &r.Message); err == nil {
		r.Time = parseStamp(top.Timestamp)
		return nil
	}
	var m struct {
		Message   string                     `json:"message"`
		ExtraInfo map[string]json.RawMessage `json:"extraInfo"`
	}
	if err := json.Unmarshal(top.Message, &m); err != nil {
		return fmt.Errorf("launch: error file: \"message\" is neither text nor torch's object: %w", err)
	}
	r.Message = m.Message
	r.Time = parseStamp(m.ExtraInfo["timestamp"])
	if v, err := strconv.Atoi(text(m.ExtraInfo["rank"])); err == nil {
		r.Rank = v
	}
	if v, err := strconv.Atoi(text(m.ExtraInfo["local_rank"])); err == nil {
		r.LocalRank = v
	}
	if v, err := strconv.Atoi(text(m.ExtraInfo["pid"])); err == nil {
		r.PID = v
	}
	// goddp writes the message above the stack; a Python worker's
	// traceback is kept whole.
	cs := text(m.ExtraInfo["py_callstack"])
	r.Stack = strings.TrimPrefix(cs, r.Message+"\n\n")
	return nil
}

// text is a JSON string's value, or a number's digits.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// parseStamp reads integer seconds (torch), as text or a number, or an RFC
// 3339 time (goddp's earlier files); zero when absent or 0.
func parseStamp(raw json.RawMessage) time.Time {
	s := text(raw)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n == 0 {
			return time.Time{}
		}
		return time.Unix(n, 0)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	return time.Time{}
}

// RecordError writes err to the error file named by $GODDP_ERROR_FILE (or
// $TORCHELASTIC_ERROR_FILE). Workers call it just before exiting non-zero;
// ddprun then prints the message as the root cause. Outside a launcher (no
// such variable) it does nothing and returns nil. A nil err is ignored.
func RecordError(err error) error {
	if err == nil {
		return nil
	}
	return writeErrorRecord(err.Error(), "")
}

// RecordPanic, deferred at the top of main, records a panic (message and
// stack) in the error file and then lets the panic continue:
//
//	func main() {
//		defer launch.RecordPanic()
//		...
//	}
func RecordPanic() {
	r := recover()
	if r == nil {
		return
	}
	_ = writeErrorRecord(fmt.Sprintf("panic: %v", r), string(debug.Stack()))
	panic(r)
}

func writeErrorRecord(msg, stack string) error {
	path := os.Getenv(EnvErrorFile)
	if path == "" {
		path = os.Getenv(EnvTorchErrorFile)
	}
	if path == "" {
		return nil
	}
	rec := ErrorRecord{
		Message:   msg,
		Rank:      envInt(EnvRank, -1),
		LocalRank: envInt(EnvLocalRank, -1),
		PID:       os.Getpid(),
		Time:      time.Now(),
		Stack:     stack,
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("launch: encode error record: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("launch: error file: %w", err)
	}
	// Write then rename, so the launcher never reads half a record.
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("launch: error file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("launch: error file: %w", err)
	}
	return nil
}

// ReadErrorFile parses an error file written by RecordError, by torch's
// ErrorHandler, or by an earlier goddp. A missing file returns (nil, nil).
func ReadErrorFile(path string) (*ErrorRecord, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("launch: error file: %w", err)
	}
	var rec ErrorRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		// A worker may have written something else (plain text, a crash
		// dump): keep it as the message rather than dropping it.
		return &ErrorRecord{Message: string(data)}, nil
	}
	return &rec, nil
}

func envInt(key string, def int) int {
	v, err := strconv.Atoi(os.Getenv(key))
	if err != nil {
		return def
	}
	return v
}
