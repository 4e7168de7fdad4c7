package comm

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// "auto" picks the two-level backend only where it has two levels.
func TestAutoBackend(t *testing.T) {
	hosts := func(hs ...string) []member {
		var ms []member
		for _, h := range hs {
			ms = append(ms, member{Host: h})
		}
		return ms
	}
	for _, tc := range []struct {
		members []member
		want    string
	}{
		{hosts("a", "a", "a"), "shm"},
		{hosts("a", "b"), "tcp"},
		{hosts("a", "a", "b", "b", "c", "c", "d", "d"), "hier"},
		{hosts("a", "b", "a", "b"), "hier"},
		{hosts("a", "a", "b"), "tcp"},
	} {
		same := true
		for _, m := range tc.members {
			same = same && m.Host == tc.members[0].Host
		}
		t.Run(fmt.Sprint(tc.members), func(t *testing.T) {
			assert.Equal(t, tc.want, autoBackend(tc.members, same))
		})
	}
}
