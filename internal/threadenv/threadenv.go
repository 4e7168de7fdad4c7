package threadenv

import (
	"os"
	"strconv"
	"strings"
)

// The variables, in the order they are read.
const (
	Key    = "GODDP_NUM_THREADS"
	OMPKey = "OMP_NUM_THREADS"
)

// Parse returns the count that lookup's environment asks for: the value of
// the first of Key and OMPKey that holds a positive integer (surrounding
// spaces allowed), or 0 when neither does.
func Parse(lookup func(key string) (string, bool)) int {
	for _, key := range [...]string{Key, OMPKey} {
		v, ok := lookup(key)
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// FromEnv is Parse over the process environment.
func FromEnv() int { return Parse(os.LookupEnv) }
