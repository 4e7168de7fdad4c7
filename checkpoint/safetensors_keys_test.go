package checkpoint

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawSafetensors is a safetensors file with the header hdr written as is,
// so that it can hold what json.Marshal never writes (duplicate keys).
func rawSafetensors(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

// duplicateEntry returns a valid checkpoint whose header gives the tensor
// name a second entry, after the first, with the shape shape (same bytes),
// checksum recomputed: what someone who can write the file would plant.
func duplicateEntry(t *testing.T, name, shape string) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, fullCheckpoint(3, 9).Write(&b))
	ck := b.Bytes()
	n := binary.LittleEndian.Uint64(ck)
	hdr := ck[8 : 8+n]
	re := regexp.MustCompile(`"` + regexp.QuoteMeta(name) + `":\{"dtype":"F32","shape":\[[0-9,]*\],("data_offsets":\[\d+,\d+\])\}`)
	m := re.FindSubmatchIndex(hdr)
	require.NotNil(t, m, "entry %s in %s", name, hdr)
	dup := `,"` + name + `":{"dtype":"F32","shape":` + shape + `,` + string(hdr[m[2]:m[3]]) + `}`
	out := append(append(append([]byte(nil), hdr[:m[1]]...), dup...), hdr[m[1]:]...)
	return withHeader(ck, out)
}

// TestSafetensorsDuplicateKeys is issue 24's item 10: encoding/json keeps
// the last of duplicate keys, so a header naming a tensor twice loaded as
// the last entry's dtype or shape (another reader may take the first). Every
// duplicate key, in the header, in __metadata__ or inside a tensor's entry,
// is refused with ErrCorrupt naming the key.
func TestSafetensorsDuplicateKeys(t *testing.T) {
	x4 := []byte{0, 0, 128, 63} // 1.0 as F32
	for _, tc := range []struct {
		name, want string
		in         []byte
	}{
		{"tensor", `duplicate key "x" in the header`, rawSafetensors(
			`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, x4)},
		{"tensor, escaped", `duplicate key "x" in the header`, rawSafetensors(
			`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"\u0078":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, x4)},
		{"metadata key", `duplicate key "format" in __metadata__`, rawSafetensors(
			`{"__metadata__":{"format":"pt","format":"np"},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, x4)},
		{"__metadata__ twice", `duplicate key "__metadata__" in the header`, rawSafetensors(
			`{"__metadata__":{"a":"1"},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":{"a":"2"}}`, x4)},
		{"entry field", `duplicate key "dtype" in tensor "x"`, rawSafetensors(
			`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"dtype":"I32"}}`, x4)},
		{"entry field, other case", `duplicate key "DType" in tensor "x"`, rawSafetensors(
			`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"DType":"I32"}}`, x4)},
		{"checkpoint tensor", `duplicate key "model.0.bias" in the header`, duplicateEntry(t, "model.0.bias", "[1,2]")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeSafetensors(tc.in, "dup.safetensors")
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "dup.safetensors")
		})
	}

	t.Run("checkpoint metadata", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, fullCheckpoint(3, 9).Write(&b))
		ck := b.Bytes()
		hdr := ck[8 : 8+binary.LittleEndian.Uint64(ck)]
		planted := withHeader(ck, bytes.Replace(hdr, []byte(`"goddp.epoch":"3"`), []byte(`"goddp.epoch":"3","goddp.epoch":"7"`), 1))
		_, err := Decode(planted, "dup.safetensors")
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), `duplicate key "goddp.epoch" in __metadata__`)
	})

	// One name in different objects is no duplicate.
	ts, meta, err := DecodeSafetensors(rawSafetensors(
		`{"__metadata__":{"dtype":"x","shape":"y"},"dtype":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, x4), "ok")
	require.NoError(t, err)
	assert.Equal(t, []float32{1}, ts["dtype"].F32())
	assert.Equal(t, "y", meta["shape"])
}
