package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzStoreDecode feeds arbitrary bytes to the store's frame reader and
// request/response decoders: they must never panic or over-allocate, and a
// request they accept must survive an encode/decode round trip.
func FuzzStoreDecode(f *testing.F) {
	for _, r := range []storeRequest{
		{Op: opSet, ID: 1, Keys: []string{"k"}, Value: []byte("v")},
		{Op: opGet, ID: 2, Keys: []string{"rank/0"}, Timeout: time.Second},
		{Op: opAdd, ID: 3, Keys: []string{"n"}, Delta: -4},
		{Op: opWait, ID: 4, Keys: []string{"a", "b"}, Timeout: time.Minute},
		{Op: opCompareSet, ID: 5, Keys: []string{"c"}, Expected: []byte("x"), Value: []byte("y")},
		{Op: opDelete, ID: 6, Keys: []string{"d"}},
		{Op: opNumKeys, ID: 7},
	} {
		f.Add(r.encode(nil))
	}
	f.Add((&storeResponse{ID: 9, Value: []byte("val"), Int: 3}).encode(nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0, 0, 0, 9, byte(opWait), 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := readStoreFrame(bytes.NewReader(data), nil)
		if err != nil {
			frame = data
		}
		decodeStoreResponse(frame)
		req, err := decodeStoreRequest(frame)
		if err != nil {
			return
		}
		again, err := decodeStoreRequest(req.encode(nil)[4:])
		require.NoError(t, err)
		require.Equal(t, req.Op, again.Op)
		require.Equal(t, req.ID, again.ID)
		require.Equal(t, len(req.Keys), len(again.Keys))
		require.True(t, bytes.Equal(req.Value, again.Value))
		// The file store's record parser shares the decoder.
		applyFileRecords(frame, map[string][]byte{})
	})
}
