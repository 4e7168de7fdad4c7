package backend

import (
	"fmt"
	"strings"
)

// OpError is the error of a failed collective or point-to-point op. It
// wraps a sentinel (ErrTimeout, ErrPeerFailed, ErrClosed, ErrBadArgument,
// ErrAuth) and, when known, the underlying cause, so both errors.Is and
// errors.As work:
//
//	var oe *comm.OpError
//	if errors.As(err, &oe) { log.Printf("dead ranks: %v", oe.Peers) }
type OpError struct {
	Kind   error  // the sentinel
	Op     string // "allreduce", "send", ...
	Seq    uint64 // the group's collective sequence number (1-based)
	Bytes  int    // payload size of the op on this rank
	Rank   int    // the rank reporting the error
	Peers  []int  // the rank(s) at fault, when known
	Detail string // what happened, in words
	Err    error  // the underlying cause, may be nil
}

func (e *OpError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %s #%d (%d bytes) on rank %d", e.Kind, e.Op, e.Seq, e.Bytes, e.Rank)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap exposes the sentinel and the cause to errors.Is/As.
func (e *OpError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// RankList renders ranks as "rank 3" or "ranks 1, 2", the form every
// backend's error messages use.
func RankList(ranks []int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	return "ranks " + strings.Join(s, ", ")
}
