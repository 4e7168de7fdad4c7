package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync"
)

// The file checksum's two forms (see the format comment in safetensors.go):
//
//   - ChunkedChecksumKey, written since 2026-11-29: the SHA-256 of the
//     concatenated SHA-256 digests of the file's consecutive ChecksumChunk
//     pieces (the last one shorter, none empty), the file taken with the
//     key's 64 digest characters replaced by '0'. The pieces hash on every
//     core while the file is written, and a plain SHA-256 of 500 MB (one
//     core, 0.75-1.2 GB/s with SHA-NI) is slower than the disk.
//   - ChecksumKey, written until then (commit 01830c6): the SHA-256 of the
//     whole file with the digest characters replaced by '0'. Still verified,
//     so old checkpoints load.
//
// Both cover every byte. The chunked form is as strong: the chunk size is
// fixed by the key, so the chunk boundaries follow from the file's length
// alone; a changed, added, removed or reordered chunk changes the list of
// chunk digests, which changes the outer digest unless SHA-256 collides.

// ChecksumKey is the metadata key of the whole-file SHA-256 that goddp wrote
// until 2026-11-29; readers still verify it.
const ChecksumKey = "goddp.sha256"

// ChunkedChecksumKey is the metadata key of the file digest goddp writes:
// SHA-256 over the SHA-256 digests of the file's ChecksumChunk-byte pieces.
const ChunkedChecksumKey = "goddp.sha256-4MiB"

// ChecksumChunk is the piece size of ChunkedChecksumKey (named in the key,
// so it can never change for that key): large enough that the per-piece
// digests (32 bytes per 4 MiB) and the hand-off to a hashing goroutine cost
// nothing, small enough that a 500 MB file spreads over many cores and the
// hashing of a piece overlaps the writing of the next ones.
const ChecksumChunk = 4 << 20

// hasChecksum reports whether meta carries a goddp file digest.
func hasChecksum(meta map[string]string) bool {
	_, old := meta[ChecksumKey]
	_, chunked := meta[ChunkedChecksumKey]
	return old || chunked
}

// chunkHasher computes ChunkedChecksumKey's digest on runtime.GOMAXPROCS(0)
// goroutines. Chunks arrive in any order as lists of byte slices (a piece
// of the file may span the header and several tensors, which are hashed in
// place, never copied); the slices must not change until sum returns.
type chunkHasher struct {
	jobs    chan chunkJob
	digests [][sha256.Size]byte
	wg      sync.WaitGroup
}

type chunkJob struct {
	index int
	parts [][]byte
}

// newChunkHasher starts the workers for a file of size bytes. The queue
// holds every chunk, so whoever feeds it (the writer) never waits for the
// hashing: 500 MB is 125 jobs of a few slice headers each.
func newChunkHasher(size int64) *chunkHasher {
	n := int((size + ChecksumChunk - 1) / ChecksumChunk)
	h := &chunkHasher{jobs: make(chan chunkJob, n), digests: make([][sha256.Size]byte, n)}
	workers := min(runtime.GOMAXPROCS(0), max(n, 1))
	h.wg.Add(workers)
	for range workers {
		go func() {
			defer h.wg.Done()
			for j := range h.jobs {
				d := sha256.New()
				for _, p := range j.parts {
					d.Write(p)
				}
				d.Sum(h.digests[j.index][:0])
			}
		}()
	}
	return h
}

// add queues chunk index, made of parts.
func (h *chunkHasher) add(index int, parts [][]byte) {
	h.jobs <- chunkJob{index, parts}
}

// sum waits for the workers and returns the outer digest in hex; every
// chunk must have been added.
func (h *chunkHasher) sum() []byte {
	close(h.jobs)
	h.wg.Wait()
	outer := sha256.New()
	for i := range h.digests {
		outer.Write(h.digests[i][:])
	}
	return []byte(hex.EncodeToString(outer.Sum(nil)))
}

// chunker cuts a stream of byte slices into ChecksumChunk pieces of the
// file, starting at file offset 0, and hands each complete piece to emit.
type chunker struct {
	emit  func(index int, parts [][]byte) error
	parts [][]byte
	fill  int
	index int
}

func (c *chunker) write(b []byte) error {
	for len(b) > 0 {
		p := b[:min(len(b), ChecksumChunk-c.fill)]
		b = b[len(p):]
		c.parts = append(c.parts, p)
		c.fill += len(p)
		if c.fill == ChecksumChunk {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush emits the piece gathered so far (the file's last, short one when
// called at the end); nothing when it is empty.
func (c *chunker) flush() error {
	if c.fill == 0 {
		return nil
	}
	parts := c.parts
	c.parts, c.fill = nil, 0
	c.index++
	return c.emit(c.index-1, parts)
}

// chunkedDigest is ChunkedChecksumKey's digest of file with the 64 bytes at
// offset at read as '0', hashed on all cores (Load's verification).
func chunkedDigest(file []byte, at int) []byte {
	h := newChunkHasher(int64(len(file)))
	for i, lo := 0, 0; lo < len(file); i, lo = i+1, lo+ChecksumChunk {
		h.add(i, zeroed(file[lo:min(lo+ChecksumChunk, len(file))], at-lo))
	}
	return h.sum()
}

// zeroed returns b as slices, with the digestLen bytes at offset at (which
// may be outside b, or straddle its ends) replaced by '0'.
func zeroed(b []byte, at int) [][]byte {
	lo, hi := max(at, 0), min(at+digestLen, len(b))
	if lo >= hi {
		return [][]byte{b}
	}
	return [][]byte{b[:lo], zeroDigest[lo-at : hi-at], b[hi:]}
}

// wholeDigest is ChecksumKey's digest (the form written until 2026-11-29):
// the SHA-256 of file with the 64 bytes at offset at read as '0'.
func wholeDigest(file []byte, at int) []byte {
	h := sha256.New()
	for _, p := range zeroed(file, at) {
		h.Write(p)
	}
	return []byte(hex.EncodeToString(h.Sum(nil)))
}

// verifyDigest checks the goddp digest of file, whose header is hdr, under
// whichever key meta holds. A file holding both is refused: each digest
// would cover the other's characters, so no goddp writer makes one.
func verifyDigest(file, hdr []byte, meta map[string]string) error {
	key, digest := ChunkedChecksumKey, chunkedDigest
	want, ok := meta[key]
	if old, hasOld := meta[ChecksumKey]; hasOld {
		if ok {
			return fmt.Errorf("metadata holds both %s and %s; a goddp writer writes one", ChecksumKey, ChunkedChecksumKey)
		}
		key, digest, want = ChecksumKey, wholeDigest, old
	} else if !ok {
		return nil
	}
	at := digestPos(hdr, key)
	if at < 0 {
		return fmt.Errorf("checksum field %s is not in goddp's compact form", key)
	}
	at += 8 // offset of the digest within the file
	got := digest(file, at)
	if !bytes.Equal(file[at:at+digestLen], []byte(want)) || string(got) != want {
		return fmt.Errorf("checksum mismatch (%s): file says %.16s…, contents hash to %.16s…", key, want, got)
	}
	return nil
}
