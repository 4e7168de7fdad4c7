package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/goddp/goddp/tensor"
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

// rechecksum returns a copy of b whose goddp digest (either form) is
// recomputed over its current contents, as an attacker who can write the
// file would do; b is returned unchanged when it has no digest field in
// goddp's compact form. The digests are computed here from their
// definitions (the format comment in safetensors.go), not with the
// package's hashing code, so tests using it check that code too.
func rechecksum(b []byte) []byte {
	if len(b) < 8 {
		return b
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return b
	}
	out := append([]byte(nil), b...)
	if at := digestPos(b[8:8+n], ChunkedChecksumKey); at >= 0 {
		copy(out[8+at:], zeroDigest)
		hex.Encode(out[8+at:], chunkedSHA256(out))
	} else if at := digestPos(b[8:8+n], ChecksumKey); at >= 0 {
		copy(out[8+at:], zeroDigest)
		sum := sha256.Sum256(out)
		hex.Encode(out[8+at:], sum[:])
	}
	return out
}

// chunkedSHA256 is ChunkedChecksumKey's digest of b, by its definition: the
// SHA-256 of the concatenated SHA-256 digests of b's consecutive 4 MiB
// pieces, sequentially.
func chunkedSHA256(b []byte) []byte {
	var cat []byte
	for lo := 0; lo < len(b); lo += 4 << 20 {
		d := sha256.Sum256(b[lo:min(lo+4<<20, len(b))])
		cat = append(cat, d[:]...)
	}
	d := sha256.Sum256(cat)
	return d[:]
}

// withHeader replaces the header of safetensors file b by hdr (fixing the
// length prefix) and recomputes the checksum.
func withHeader(b, hdr []byte) []byte {
	n := binary.LittleEndian.Uint64(b)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	out = append(append(out, hdr...), b[8+n:]...)
	return rechecksum(out)
}

// emptyTensorCheckpoint is a valid checkpoint holding a zero-size tensor
// (shape [0,3], data_offsets [k,k]), the shape a planted [0,-1] replaces.
func emptyTensorCheckpoint(tb testing.TB) []byte {
	c := fullCheckpoint(3, 9)
	c.Model["empty"] = tensor.FromF32(nil, 0, 3)
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// replaceShape rewrites the first header shape equal to from (JSON, e.g.
// "[0,3]") as to, keeping the data offsets, and recomputes the checksum.
func replaceShape(tb testing.TB, ck []byte, from, to string) []byte {
	n := binary.LittleEndian.Uint64(ck)
	hdr := ck[8 : 8+n]
	old := []byte(`"shape":` + from)
	if !bytes.Contains(hdr, old) {
		tb.Fatalf("checkpoint has no %s in its header %s", old, hdr)
	}
	return withHeader(ck, bytes.Replace(hdr, old, []byte(`"shape":`+to), 1))
}

// seedShapes adds checkpoints with zero, negative and huge dimensions
// spliced into a valid header, so the fuzzer starts next to the shape checks.
func seedShapes(f *testing.F) {
	ck := emptyTensorCheckpoint(f)
	for _, s := range []string{"[0,-1]", "[-1,0]", "[0,0,-4]", "[3,0,-1]", "[-2,-2]", "[0]", "[0,4611686018427387904,4]", "[-4611686018427387904,0]"} {
		f.Add(replaceShape(f, ck, "[0,3]", s))
		f.Add(replaceShape(f, ck, "[2,2]", s))
	}
}

// checkDecoded fails on the outcomes a decoder must never produce: an error
// outside ErrCorrupt/ErrUnsupported, or more elements than the input has
// bytes (allocation is bounded by the input, whatever the header claims).
func checkDecoded(t *testing.T, in []byte) {
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
}

// FuzzSafetensors feeds arbitrary bytes to the safetensors and checkpoint
// decoders: they must never panic and fail only with ErrCorrupt or
// ErrUnsupported. Most mutations of a checksummed file stop at the digest;
// FuzzCheckpointRechecksummed gets past it.
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
	seedShapes(f)
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}              "))
	f.Add([]byte("\x40\x00\x00\x00\x00\x00\x00\x00{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}   \x00\x3c\x00\xc0"))
	f.Add([]byte("\x40\x00\x00\x00\x00\x00\x00\x00{\"x\":{\"dtype\":\"F32\",\"shape\":[0,-1],\"data_offsets\":[0,0]}}     "))
	f.Fuzz(func(t *testing.T, in []byte) { checkDecoded(t, in) })
}

// FuzzCheckpointRechecksummed recomputes the digest of every mutated input
// before decoding, so mutations of the header, metadata (epoch, optimizer
// and sampler state, RNG) and tensor bytes reach the checkpoint decoder
// instead of all ending at the checksum.
// Run: go test -run XXX -fuzz FuzzCheckpointRechecksummed -fuzztime 30s ./checkpoint/
func FuzzCheckpointRechecksummed(f *testing.F) {
	var ck bytes.Buffer
	if err := fullCheckpoint(3, 9).Write(&ck); err != nil {
		f.Fatal(err)
	}
	f.Add(ck.Bytes())
	seedShapes(f)
	f.Fuzz(func(t *testing.T, in []byte) { checkDecoded(t, rechecksum(in)) })
}
