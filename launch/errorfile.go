package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"
)

// ErrorRecord is the JSON a worker writes to $GODDP_ERROR_FILE (the same
// path is exported as TORCHELASTIC_ERROR_FILE) so that the launcher can show
// the real cause of a failure rather than only an exit code.
type ErrorRecord struct {
	Message   string    `json:"message"`
	Rank      int       `json:"rank"`
	LocalRank int       `json:"local_rank"`
	PID       int       `json:"pid"`
	Time      time.Time `json:"timestamp"`
	Stack     string    `json:"stack,omitempty"`
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

// ReadErrorFile parses an error file written by RecordError. A missing file
// returns (nil, nil).
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
		// A worker may have written something else (a torch-style record,
		// plain text): keep it as the message rather than dropping it.
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
