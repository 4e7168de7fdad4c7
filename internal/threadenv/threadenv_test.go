package threadenv

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParse(t *testing.T) {
	cases := []struct {
		goddp, omp string // "-": unset
		want       int
	}{
		{"-", "-", 0}, {"3", "-", 3}, {"-", "2", 2}, {"1", "4", 1}, {"x", "2", 2},
		{"0", "-", 0}, {" 2 ", "-", 2}, {"", "5", 5}, {"-1", "0", 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("goddp=%q,omp=%q", tc.goddp, tc.omp), func(t *testing.T) {
			env := map[string]string{}
			if tc.goddp != "-" {
				env[Key] = tc.goddp
			}
			if tc.omp != "-" {
				env[OMPKey] = tc.omp
			}
			got := Parse(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(Key, "")
	t.Setenv(OMPKey, "6")
	assert.Equal(t, 6, FromEnv())
}
