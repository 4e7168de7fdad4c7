package checkpoint

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// bigCheckpoint is a checkpoint file of about 13 MiB: four checksum
// chunks, the last one partial, the middle two all tensor data, written by Save (the one-pass writer).
func bigCheckpoint(t *testing.T) (*Checkpoint, []byte) {
	t.Helper()
	rng := tensor.NewRNG(5)
	c := &Checkpoint{Epoch: 1, Step: 9, Model: map[string]*tensor.Tensor{
		"w":   tensor.Rand(rng, tensor.Float32, 13<<20/4-1000),
		"b":   tensor.Rand(rng, tensor.Float64, 77),
		"ids": tensor.FromI64([]int64{4, 5}, 2),
	}, Meta: map[string]string{"k": "v"}}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	require.NoError(t, Save(path, c))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 4, (len(b)+ChecksumChunk-1)/ChecksumChunk)
	return c, b
}

// metaDigest returns the value and file offset of key's digest in b.
func metaDigest(t *testing.T, b []byte, key string) (string, int) {
	t.Helper()
	n := binary.LittleEndian.Uint64(b)
	at := digestPos(b[8:8+n], key)
	require.GreaterOrEqual(t, at, 0, "no %s in the header", key)
	return string(b[8+at : 8+at+digestLen]), 8 + at
}

// The digest Save writes is the chunked one by its definition (computed
// here sequentially: SHA-256 over the 4 MiB pieces' SHA-256s, digest
// zeroed), the old key is absent, and the two-pass writer (Checkpoint.Write
// into memory) produces the same bytes.
func TestChunkedChecksumDefinition(t *testing.T) {
	c, b := bigCheckpoint(t)
	want, at := metaDigest(t, b, ChunkedChecksumKey)
	z := bytes.Clone(b)
	copy(z[at:], zeroDigest)
	assert.Equal(t, hex.EncodeToString(chunkedSHA256(z)), want)
	assert.Equal(t, -1, digestPos(b[8:8+binary.LittleEndian.Uint64(b)], ChecksumKey), "old key not written")

	var buf bytes.Buffer
	require.NoError(t, c.Write(&buf))
	assert.True(t, bytes.Equal(b, buf.Bytes()), "Save and Checkpoint.Write give the same file")
	_, err := Decode(b, "big")
	require.NoError(t, err)
}

// A file of exactly two chunks has two chunk digests, not a third of an
// empty piece (the Python checker's range(0, len, 4 MiB) agrees).
func TestChunkedChecksumExactMultiple(t *testing.T) {
	n := 2*ChecksumChunk/4 - 64
	var b []byte
	for range 4 { // the header's length depends on n's digits: iterate to a fixed point
		ts := map[string]*tensor.Tensor{"a": tensor.New(tensor.Float32, n)}
		var err error
		b, err = EncodeSafetensors(ts, nil)
		require.NoError(t, err)
		n -= (len(b) - 2*ChecksumChunk) / 4
	}
	require.Equal(t, 2*ChecksumChunk, len(b))
	want, at := metaDigest(t, b, ChunkedChecksumKey)
	z := bytes.Clone(b)
	copy(z[at:], zeroDigest)
	d0, d1 := sha256.Sum256(z[:ChecksumChunk]), sha256.Sum256(z[ChecksumChunk:])
	outer := sha256.Sum256(append(d0[:], d1[:]...))
	assert.Equal(t, hex.EncodeToString(outer[:]), want)
	_, _, err := DecodeSafetensors(b, "two")
	require.NoError(t, err)
}

// The digest's zeroed characters may straddle a chunk boundary (a header
// over 4 MiB): each side is zeroed in its own chunk.
func TestChunkedDigestStraddlingBoundary(t *testing.T) {
	b := make([]byte, ChecksumChunk+100)
	rand.Read(b)
	for _, at := range []int{0, ChecksumChunk - 64, ChecksumChunk - 10, ChecksumChunk - 1, ChecksumChunk, len(b) - 64} {
		z := bytes.Clone(b)
		copy(z[at:], zeroDigest)
		assert.Equal(t, hex.EncodeToString(chunkedSHA256(z)), string(chunkedDigest(b, at)), "digest at %d", at)
	}
}

// Corruption detection over several chunks: a flipped bit anywhere (each
// chunk's first, middle and last bytes, on both sides of each boundary, in
// the header, in the digest), truncation (inside the header, at a chunk
// boundary, inside a chunk, the last byte), an appended byte and two chunks
// swapped are all refused. Single chunks are covered byte by byte by
// TestCheckpointDetectsEveryCorruption.
func TestChunkedChecksumDetectsCorruption(t *testing.T) {
	_, b := bigCheckpoint(t)
	_, at := metaDigest(t, b, ChunkedChecksumKey)
	n := int(binary.LittleEndian.Uint64(b))
	meta := bytes.Index(b, []byte(`"k":"v"`)) + 5 // a metadata value: stays valid JSON when flipped
	flips := []int{0, 3, meta, at, at + 63, 8 + n, len(b) - 1}
	for k := 1; k*ChecksumChunk < len(b); k++ {
		flips = append(flips, k*ChecksumChunk-1, k*ChecksumChunk, k*ChecksumChunk+1, k*ChecksumChunk+ChecksumChunk/2)
	}
	for _, i := range flips {
		if i >= len(b) {
			continue // the middle of the last, partial chunk
		}
		cb := bytes.Clone(b)
		cb[i] ^= 0x01
		_, err := Decode(cb, "flip.safetensors")
		require.ErrorIs(t, err, ErrCorrupt, "bit flipped at byte %d of %d", i, len(b))
		assert.Contains(t, err.Error(), "flip.safetensors")
		if i >= 8 {
			assert.Contains(t, err.Error(), "checksum mismatch", "byte %d", i)
		}
	}
	for _, size := range []int{4, 8 + n/2, 8 + n, ChecksumChunk, ChecksumChunk + 1, 2*ChecksumChunk + 12345, len(b) - 1} {
		_, err := Decode(b[:size], "cut.safetensors")
		require.ErrorIs(t, err, ErrCorrupt, "truncated to %d bytes", size)
		assert.Contains(t, err.Error(), "cut.safetensors")
	}
	swapped := bytes.Clone(b) // chunks 1 and 2 exchanged: still a well-formed file
	copy(swapped[ChecksumChunk:], b[2*ChecksumChunk:3*ChecksumChunk])
	copy(swapped[2*ChecksumChunk:], b[ChecksumChunk:2*ChecksumChunk])
	for name, cb := range map[string][]byte{
		"appended byte":       append(bytes.Clone(b), 0),
		"chunks 1, 2 swapped": swapped,
	} {
		_, err := Decode(cb, "x.safetensors")
		require.ErrorIs(t, err, ErrCorrupt, name)
		assert.Contains(t, err.Error(), "checksum mismatch", name)
	}
}

// legacyFixture is a checkpoint written by Save at commit 01830c6, before
// the chunked digest: fullCheckpoint(3, 1234) under the whole-file
// "goddp.sha256".
const legacyFixture = "testdata/legacy-sha256.safetensors"

// An old-format file still loads and verifies, and every single-byte
// corruption or truncation of it is still refused (the old form's own
// check, not just the key's presence).
func TestLegacyChecksumStillVerifies(t *testing.T) {
	b, err := os.ReadFile(legacyFixture)
	require.NoError(t, err)
	old, at := metaDigest(t, b, ChecksumKey)
	n := binary.LittleEndian.Uint64(b)
	assert.Equal(t, -1, digestPos(b[8:8+n], ChunkedChecksumKey), "fixture predates the chunked key")
	z := bytes.Clone(b)
	copy(z[at:], zeroDigest)
	sum := sha256.Sum256(z)
	require.Equal(t, hex.EncodeToString(sum[:]), old, "fixture's digest is the whole-file SHA-256")

	c, err := Load(legacyFixture)
	require.NoError(t, err)
	want := fullCheckpoint(3, 1234)
	assert.Equal(t, want.Epoch, c.Epoch)
	assert.Equal(t, want.Step, c.Step)
	assertSameTensors(t, want.Model, c.Model)
	assert.Equal(t, want.Optimizer.Scalars, c.Optimizer.Scalars)

	for i := range b {
		cb := bytes.Clone(b)
		cb[i] ^= 0x01
		_, err := Decode(cb, "flip.safetensors")
		require.Error(t, err, "bit flipped at byte %d", i) // ErrUnsupported when "__metadata__" becomes a tensor name
		require.Contains(t, err.Error(), "flip.safetensors")
	}
	for size := range len(b) {
		_, err := Decode(b[:size], "cut.safetensors")
		require.ErrorIs(t, err, ErrCorrupt, "truncated to %d bytes", size)
	}
	cb := bytes.Clone(b)
	cb[len(cb)-1] ^= 0x01
	_, err = Decode(cb, "data.safetensors")
	assert.Contains(t, err.Error(), "checksum mismatch (goddp.sha256)")
}

// Re-saving what an old file held (its metadata includes the old digest)
// writes the chunked digest only, and the result loads.
func TestResaveLegacyWritesChunkedOnly(t *testing.T) {
	ts, meta, err := LoadSafetensors(legacyFixture)
	require.NoError(t, err)
	require.Contains(t, meta, ChecksumKey)
	b, err := EncodeSafetensors(ts, meta)
	require.NoError(t, err)
	_, gotMeta, err := DecodeSafetensors(b, "resaved")
	require.NoError(t, err)
	assert.NotContains(t, gotMeta, ChecksumKey)
	assert.Len(t, gotMeta[ChunkedChecksumKey], digestLen)
	assert.NotEqual(t, meta[ChecksumKey], gotMeta[ChunkedChecksumKey])
}

// A header carrying both digests is refused: each would cover the other's
// characters, so no goddp writer produces one, and verifying only one would
// let the other say anything.
func TestBothChecksumKeysRefused(t *testing.T) {
	hdr, names, err := encodeHeader(sampleTensors(), map[string]string{"x": "1"}, true)
	require.NoError(t, err)
	hdr = bytes.Replace(hdr, []byte(`"x":"1"`), []byte(`"goddp.sha256":"`+string(zeroDigest)+`"`), 1)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	for _, name := range names {
		b = append(b, tensorBytes(sampleTensors()[name])...)
	}
	b = rechecksum(b) // a valid chunked digest
	_, _, err = DecodeSafetensors(b, "both.safetensors")
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "both goddp.sha256 and goddp.sha256-4MiB")
}
