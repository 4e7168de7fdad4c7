// Package envcfg parses the GODDP_* tuning variables of comm's backends
// into their typed Config structs, one way for every backend: a size
// accepts a byte count with an optional K, M or G suffix (powers of 1024),
// a duration is a Go duration, and a value that does not parse is an error
// naming the variable, never silently ignored.
package envcfg

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// Lookup reads a variable (os.LookupEnv, or a map in tests).
type Lookup func(name string) (string, bool)

// Reader collects the first parse error of a run of reads.
type Reader struct {
	Lookup Lookup
	Err    error
}

func (r *Reader) get(name string) (string, bool) {
	v, ok := r.Lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (r *Reader) fail(name, v, why string) {
	if r.Err == nil {
		r.Err = fmt.Errorf("%w: %s=%q: %s", backend.ErrBadArgument, name, v, why)
	}
}

// Bytes sets *dst from a size such as "65536", "64K", "4M" or "1G"
// (also "64KiB", "4MB"); an unset variable leaves *dst alone.
func (r *Reader) Bytes(name string, dst *int) {
	v, ok := r.get(name)
	if !ok {
		return
	}
	n, err := ParseBytes(v)
	if err != nil {
		r.fail(name, v, err.Error())
		return
	}
	*dst = n
}

// Int sets *dst from a plain non-negative integer.
func (r *Reader) Int(name string, dst *int) {
	v, ok := r.get(name)
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		r.fail(name, v, "want a non-negative integer")
		return
	}
	*dst = n
}

// Duration sets *dst from a Go duration ("2ms", "100us"). A zero duration
// is stored as off (-1), because a zero field in a Config means "the
// default".
func (r *Reader) Duration(name string, dst *time.Duration) {
	v, ok := r.get(name)
	if !ok {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, v, "want a non-negative Go duration such as 2ms or 100us")
		return
	}
	*dst = offIfZero(d)
}

// Micros sets *dst from a whole number of microseconds; 0 is stored as off
// (-1), as in Duration.
func (r *Reader) Micros(name string, dst *time.Duration) {
	v, ok := r.get(name)
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		r.fail(name, v, "want a non-negative number of microseconds")
		return
	}
	*dst = offIfZero(time.Duration(n) * time.Microsecond)
}

// String sets *dst from the variable when it is set to one of allowed
// (compared case-insensitively, stored lower-case), or to anything when
// allowed is empty.
func (r *Reader) String(name string, dst *string, allowed ...string) {
	v, ok := r.get(name)
	if !ok {
		return
	}
	if len(allowed) > 0 {
		lv := strings.ToLower(v)
		for _, a := range allowed {
			if lv == a {
				*dst = lv
				return
			}
		}
		r.fail(name, v, "want one of "+strings.Join(allowed, ", "))
		return
	}
	*dst = v
}

func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// ParseBytes parses a size: digits with an optional K, M or G suffix
// (powers of 1024, either case, optionally followed by "B" or "iB").
func ParseBytes(v string) (int, error) {
	s := strings.TrimSpace(v)
	for _, suf := range []string{"iB", "ib", "B", "b"} {
		if t, ok := strings.CutSuffix(s, suf); ok && t != "" && strings.ContainsAny(t[len(t)-1:], "kKmMgG") {
			s = t
			break
		}
	}
	mult := 1
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a size such as 65536, 64K or 4M")
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size too large")
	}
	return n * mult, nil
}
