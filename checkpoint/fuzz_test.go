package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// withoutChecksum encodes sampleTensors as a foreign writer would, so the
// fuzzer can mutate headers without every mutation failing the digest.
func withoutChecksum(f *testing.F) []byte {
	ts := sampleTensors()
	hdr, names, err := encodeHeader(ts, map[string]string{"format": "pt"}, false)
	if err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(hdr)))
	b.Write(hdr)
	for _, n := range names {
		b.Write(tensorBytes(ts[n]))
	}
	return b.Bytes()
}

// FuzzSafetensors feeds arbitrary bytes to the safetensors and checkpoint
// decoders: they must never panic, must fail only with ErrCorrupt or
// ErrUnsupported, and must never return more elements than the input has
// bytes (allocation is bounded by the input, whatever the header claims).
// Run: go test -run XXX -fuzz FuzzSafetensors -fuzztime 30s ./checkpoint/
func FuzzSafetensors(f *testing.F) {
	st, err := EncodeSafetensors(sampleTensors(), map[string]string{"a": "b"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(st)
	var ck bytes.Buffer
	if err := fullCheckpoint(3, 9).Write(&ck); err != nil {
		f.Fatal(err)
	}
	f.Add(ck.Bytes())
	f.Add(withoutChecksum(f))
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}              "))
	f.Add([]byte("\x40\x00\x00\x00\x00\x00\x00\x00{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}   \x00\x3c\x00\xc0"))
	f.Fuzz(func(t *testing.T, in []byte) {
		ts, _, err := DecodeSafetensors(in, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unexpected error class: %v", err)
			}
		} else {
			total := 0
			for _, x := range ts {
				total += x.Numel()
			}
			if total > len(in) {
				t.Fatalf("%d elements from %d bytes", total, len(in))
			}
		}
		if _, err := Decode(in, "fuzz"); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("unexpected checkpoint error class: %v", err)
		}
	})
}
