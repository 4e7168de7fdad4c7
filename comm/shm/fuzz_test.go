package shm

import (
	"testing"
)

// The largest world the layout check tries, and the size no layout may
// reach (offsets past it would be one multiplication from overflowing).
const (
	shmMaxWorld   = 1024
	shmMaxSegment = 1 << 60
)

// FuzzSegmentRecord feeds arbitrary text to the decoder of the segment
// record rank 0 publishes in the store (its name and geometry), which the
// other ranks trust to size a mapping. It must never panic; a record it
// accepts must name a file directly under /dev/shm, survive an
// encode/decode round trip, and give a layout whose offsets neither
// overflow nor overlap for any world size shm runs.
func FuzzSegmentRecord(f *testing.F) {
	p := Config{}.resolve(2).params()
	p.name, p.nonce = "goddp-shm-1-0123456789abcdef", 42
	f.Add(p.encode())
	f.Add("v3 goddp-shm-1-x -1 2 0 1 0 4096 1")
	f.Add("v3 goddp-shm-1-x 4611686018427387904 1024 0 4096 0 4096 1")
	f.Add("v3 goddp-shm-1-x 65536 4611686018427387904 0 4096 0 4096 1")
	f.Add("v3 goddp-shm-1-x 65536 4 0 4096 0 9223372036854775800 1")
	f.Add("v3 ../etc/passwd 65536 4 0 4096 0 4096 1")
	f.Add("v3 .. 65536 4 0 4096 0 4096 1")
	f.Add("v3 x 65536 4 -5 4096 -7 4096 1")
	f.Add("v2 goddp-shm-1-x 65536 4 0 4096 0 1")
	f.Add("")
	f.Fuzz(func(t *testing.T, rec string) {
		p, err := decodeShmParams(rec)
		if err != nil {
			return
		}
		if p.name == "" || p.name == "." || p.name == ".." || len(p.name) > 255 {
			t.Fatalf("accepted segment name %q", p.name)
		}
		for _, c := range p.name {
			if c == '/' || c == 0 {
				t.Fatalf("accepted segment name %q", p.name)
			}
		}
		again, err := decodeShmParams(p.encode())
		if err != nil || again != p {
			t.Fatalf("round trip of %+v: %+v, %v", p, again, err)
		}
		if p.smallMax < 0 || p.cmaMin < 0 || p.chunkBytes <= 0 || p.chunkBytes > p.slotBytes {
			t.Fatalf("accepted sizes %+v", p)
		}
		for _, world := range []int{1, 2, 64, shmMaxWorld} {
			l := newShmLayout(world, p.slotBytes, p.nbuf, p.ringBytes)
			if !(shmHdrSize <= l.dataOff && l.dataOff <= l.p2pCtlOff && l.p2pCtlOff < l.p2pDataOff && l.p2pDataOff < l.total) ||
				l.total > shmMaxSegment {
				t.Fatalf("record %q gives the layout %+v for %d ranks", rec, l, world)
			}
		}
	})
}
