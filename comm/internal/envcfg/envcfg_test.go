package envcfg

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "65536": 65536, "64K": 64 << 10, "64k": 64 << 10, "4M": 4 << 20, "4MiB": 4 << 20, "4MB": 4 << 20, "1G": 1 << 30, " 8K ": 8 << 10} {
		got, err := ParseBytes(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "K", "4X", "-1", "1.5M", "4 M", "99999999999999999G", "B"} {
		_, err := ParseBytes(in)
		assert.Error(t, err, in)
	}
}

func TestReader(t *testing.T) {
	env := map[string]string{"SIZE": "4M", "N": "3", "D": "2ms", "ZERO_D": "0s", "US": "200", "ZERO_US": "0", "MODE": "Eager", "EMPTY": "  "}
	r := Reader{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	var size, n, unset int = 0, 0, 7
	var d, zd, us, zus time.Duration
	var mode string
	r.Bytes("SIZE", &size)
	r.Int("N", &n)
	r.Bytes("UNSET", &unset)
	r.Bytes("EMPTY", &unset)
	r.Duration("D", &d)
	r.Duration("ZERO_D", &zd)
	r.Micros("US", &us)
	r.Micros("ZERO_US", &zus)
	r.String("MODE", &mode, "eager", "lazy")
	require.NoError(t, r.Err)
	assert.Equal(t, 4<<20, size)
	assert.Equal(t, 3, n)
	assert.Equal(t, 7, unset, "an unset or blank variable keeps the default")
	assert.Equal(t, 2*time.Millisecond, d)
	assert.Equal(t, time.Duration(-1), zd, "zero means off, not default")
	assert.Equal(t, 200*time.Microsecond, us)
	assert.Equal(t, time.Duration(-1), zus)
	assert.Equal(t, "eager", mode)

	for name, val := range map[string]string{"SIZE": "4Q", "N": "4K", "D": "5", "US": "1ms", "MODE": "fast"} {
		env := map[string]string{name: val}
		r := Reader{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
		var i int
		var dd time.Duration
		var s string
		switch name {
		case "SIZE":
			r.Bytes(name, &i)
		case "N":
			r.Int(name, &i)
		case "D":
			r.Duration(name, &dd)
		case "US":
			r.Micros(name, &dd)
		case "MODE":
			r.String(name, &s, "eager", "lazy")
		}
		require.ErrorIs(t, r.Err, backend.ErrBadArgument, name)
		assert.ErrorContains(t, r.Err, name+"=", "the error names the variable")
	}
}
