package bytesize

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"4096": 4096, "4K": 4 << 10, "4k": 4 << 10, "64M": 64 << 20, "64MiB": 64 << 20, "64mb": 64 << 20,
		"2G": 2 << 30, "2GiB": 2 << 30, " 1G ": 1 << 30, "0": 0, "7B": 7,
	} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "G", "-1", "1.5G", "1T", "x", "9223372036854775807K"} {
		_, err := Parse(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", in))
	}
}

func TestFormatRoundTrips(t *testing.T) {
	for _, b := range []int64{0, 1000, 4096, 64 << 20, 3 << 30, 1<<30 + 1} {
		s := Format(b)
		got, err := Parse(s)
		require.NoError(t, err)
		assert.Equal(t, b, got, s)
	}
	assert.Equal(t, "64M", Format(64<<20))
	assert.Equal(t, "1000", Format(1000))
}

func ExampleParse() {
	n, _ := Parse("512MiB")
	fmt.Println(n, Format(n))
	// Output: 536870912 512M
}
