package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a byte count: digits, then an optional K, M or G (1024,
// 1024², 1024³), then an optional "iB" or "B"; case does not matter. A
// negative count, a fraction, or an overflow is an error naming the text.
func Parse(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			shift, t = 10, t[:n-1]
		case 'M':
			shift, t = 20, t[:n-1]
		case 'G':
			shift, t = 30, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<63-1)>>shift {
		return 0, fmt.Errorf("bad size %q: want a count of bytes such as 4096, 64K, 512M or 2G", s)
	}
	return v << shift, nil
}

// Format writes b as Parse reads it, with the largest multiple that
// divides it: 4096 as "4K", 67108864 as "64M", 1000 as "1000".
func Format(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dK", b>>10)
	}
	return strconv.FormatInt(b, 10)
}
