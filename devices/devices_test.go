package devices_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/goddp/goddp/devices"
	"github.com/goddp/goddp/tensor"
)

// The blank import registers both kinds (with cgo), and "sim:N" opens.
func TestKinds(t *testing.T) {
	if !cgoEnabled {
		t.Skip("built without cgo: no driver is linked")
	}
	require.Equal(t, []string{"cpu", "cuda", "sim"}, tensor.DeviceKinds())
	d, err := tensor.OpenDevice("sim:1")
	require.NoError(t, err)
	require.Equal(t, "sim:1", d.String())
	c, ok := d.(io.Closer)
	require.True(t, ok, "a device opened by name can be closed")
	require.NoError(t, c.Close())
}
