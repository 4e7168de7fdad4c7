package launch

import (
	"fmt"
	"strings"
	"syscall"
	"time"
)

// WorkerFailure describes one worker that exited non-zero or died by a
// signal. It is what ddprun prints as the root cause, and it travels between
// nodes as JSON through the rendezvous store.
type WorkerFailure struct {
	Rank      int    `json:"rank"`
	LocalRank int    `json:"local_rank"`
	GroupRank int    `json:"group_rank"` // node index in the job
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	// ExitCode is the exit status, or -1 when the worker died by a signal.
	ExitCode int `json:"exit_code"`
	// Signal is the signal that killed the worker, 0 when it exited.
	Signal     syscall.Signal `json:"signal,omitempty"`
	Time       time.Time      `json:"time"`
	StderrTail []string       `json:"stderr_tail,omitempty"`
	ErrorFile  string         `json:"error_file,omitempty"`
	// Record is the error file the worker wrote with RecordError, if any.
	Record *ErrorRecord `json:"record,omitempty"`
	// Attempt is the restart count of the round the failure happened in.
	Attempt int `json:"attempt"`
	// NodeLost: not one worker but a whole node's launcher vanished.
	NodeLost bool `json:"node_lost,omitempty"`
}

// Cause is "exit code 3" or "signal SIGKILL".
func (f *WorkerFailure) Cause() string {
	if f.NodeLost {
		return "node lost"
	}
	if f.Signal != 0 {
		return "signal " + signalName(f.Signal)
	}
	return fmt.Sprintf("exit code %d", f.ExitCode)
}

func (f *WorkerFailure) Error() string {
	if f.NodeLost {
		return fmt.Sprintf("node %d (%s) lost: %s", f.GroupRank, f.Host, f.Record.Message)
	}
	s := fmt.Sprintf("rank %d (local rank %d", f.Rank, f.LocalRank)
	if f.Host != "" {
		s += " on " + f.Host
	}
	s += ") failed with " + f.Cause()
	if f.Record != nil && f.Record.Message != "" {
		s += ": " + firstLine(f.Record.Message)
	} else if n := len(f.StderrTail); n > 0 {
		s += ": " + f.StderrTail[n-1]
	}
	return s
}

// Report is the multi-line root-cause block ddprun prints.
func (f *WorkerFailure) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  rank       : %d (local rank %d, node %d", f.Rank, f.LocalRank, f.GroupRank)
	if f.Host != "" {
		fmt.Fprintf(&b, ", host %s", f.Host)
	}
	fmt.Fprintf(&b, ")\n")
	fmt.Fprintf(&b, "  pid        : %d\n", f.PID)
	fmt.Fprintf(&b, "  cause      : %s\n", f.Cause())
	fmt.Fprintf(&b, "  time       : %s\n", f.Time.Format(time.RFC3339Nano))
	fmt.Fprintf(&b, "  attempt    : %d\n", f.Attempt)
	if f.ErrorFile != "" {
		fmt.Fprintf(&b, "  error file : %s\n", f.ErrorFile)
	}
	if f.Record != nil {
		fmt.Fprintf(&b, "  message    : %s\n", indentRest(f.Record.Message, "               "))
		if f.Record.Stack != "" {
			fmt.Fprintf(&b, "  stack      :\n%s\n", indentAll(strings.TrimRight(f.Record.Stack, "\n"), "    "))
		}
	} else {
		fmt.Fprintf(&b, "  error file : <none written; call launch.RecordError in the worker to add one>\n")
	}
	if len(f.StderrTail) > 0 {
		fmt.Fprintf(&b, "  stderr (last %d lines):\n%s\n", len(f.StderrTail), indentAll(strings.Join(f.StderrTail, "\n"), "    | "))
	} else {
		fmt.Fprintf(&b, "  stderr     : <empty>\n")
	}
	return b.String()
}

// FailureError is returned by Run and Spawn when workers failed and no
// restart was left. It matches ErrWorkerFailed.
type FailureError struct {
	// Root is the first failure observed in the last attempt (on any node).
	Root WorkerFailure
	// Others are further workers of the last attempt that failed on their own
	// on this node before they were stopped.
	Others []WorkerFailure
	// Restarts is how many restarts were used.
	Restarts int
}

func (e *FailureError) Error() string {
	return fmt.Sprintf("%v: %s", ErrWorkerFailed, e.Root.Error())
}

func (e *FailureError) Is(target error) bool { return target == ErrWorkerFailed }

// Unwrap exposes the root failure, so errors.As(err, &*WorkerFailure) works.
func (e *FailureError) Unwrap() error { return &e.Root }

// Report is the full multi-line description: root cause, then the others.
func (e *FailureError) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Root cause (first observed failure):\n%s", e.Root.Report())
	for i := range e.Others {
		fmt.Fprintf(&b, "Other failure:\n%s", e.Others[i].Report())
	}
	return b.String()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func indentAll(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

func indentRest(s, prefix string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
