package tcp

import (
	"bytes"
	"errors"
	"github.com/goddp/goddp/comm/backend"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzFrameDecode feeds arbitrary bytes to the peer-connection framing:
// the header decoder must reject what it cannot accept without panicking,
// a header it accepts must round-trip, and the frame reader must never read
// past a frame or allocate from an unchecked length.
func FuzzFrameDecode(f *testing.F) {
	var b [frameHeaderLen]byte
	(&frameHeader{Kind: frameData, Seq: 7, Step: 1, Aux: 2, Length: 3}).encode(b[:])
	f.Add(append(b[:], 1, 2, 3))
	var d [frameHeaderLen + descLen]byte
	(&frameHeader{Kind: frameData, Seq: 7, Length: 2, HasDesc: true, Desc: opDesc{coll: collBroadcast, dtype: backend.Float32, count: 1}}).encode(d[:])
	f.Add(append(d[:], 1, 2))
	(&frameHeader{Kind: frameAbort, Length: 5}).encode(b[:])
	f.Add(append(b[:], encodeAbort(&peerFault{kind: backend.ErrTimeout, peers: []int{3}, detail: "x"})...))
	(&frameHeader{Kind: frameProgressReply, Length: 34}).encode(b[:])
	f.Add(append(b[:], progressNote{op: "allreduce"}.encode()...))
	f.Add([]byte{9, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := decodeFrameHeader(data)
		if err == nil {
			var again [frameHeaderLen + descLen]byte
			h.encode(again[:])
			h2, err := decodeFrameHeader(again[:])
			require.NoError(t, err)
			require.Equal(t, h, h2)
			require.LessOrEqual(t, int(h.Length), maxFramePayload)
		}
		// Read frames the way a connection's reader does, with the
		// payloads bounded by what the stream holds.
		fr := newFrameReader(bytes.NewReader(data), 64)
		for {
			h, err := fr.readHeader()
			if err != nil {
				require.True(t, errors.Is(err, errFrame) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
				break
			}
			if int(h.Length) > len(data) {
				break // a real reader would wait for the bytes; nothing to allocate here
			}
			payload := make([]byte, h.Length)
			if err := fr.readFull(payload); err != nil {
				break
			}
			switch h.Kind {
			case frameAbort:
				decodeAbort(1, payload)
			case frameProgressReply:
				decodeProgress(1, payload)
			}
		}
	})
}
