package data

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/goddp/goddp/tensor"
)

// tarShard is a tar file in webdataset's layout: each sample is a run of
// consecutive members sharing a key.
type tarShard struct {
	name string
	n    int
	in   shardInfo
	spec *sampleSpec
}

// tarSamplesRecord is the PAX record WriteShards puts on a tar shard's
// first member: the number of samples it wrote, which OpenShards checks
// against the samples it finds (a cut tar that a tool closed with a new
// end-of-archive marker still comes up short). PAX's VENDOR.keyword form,
// which other readers ignore.
const tarSamplesRecord = "GODDP.samples"

// tarBlock is tar's block size: headers and member data are padded to it,
// and two zero blocks end the archive.
const tarBlock = 512

// tarKey splits a member name into its sample key (directory plus the base
// name up to its first dot) and the rest (the "extension" that says what
// the member is), as webdataset does.
func tarKey(name string) (key, ext string) {
	dir, base := path.Split(name)
	if i := strings.IndexByte(base, '.'); i >= 0 {
		return dir + base[:i], base[i+1:]
	}
	return dir + base, ""
}

// memberRole says what a member holds: "input", "label", "target" or ""
// (ignored).
func memberRole(ext string) string {
	switch ext = strings.ToLower(ext); ext {
	case "npy", "input.npy", "x.npy":
		return "input"
	case "cls", "label", "label.txt", "cls.txt":
		return "label"
	case "target.npy", "targets.npy", "y.npy":
		return "target"
	}
	return ""
}

// isSparse says whether h is a sparse member, GNU's old form (type 'S') or
// PAX's (GNU.sparse.* records): its declared size is what it expands to,
// not what the file holds (a 10 KB tar can declare 2^36 bytes of holes),
// and no shard writer makes one.
func isSparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// tarWalk follows a tar's physical layout beside archive/tar, which reports
// the end of a file cut at a member boundary as the normal end of the
// archive: it records where the last member's data end, so that at the end
// it can tell whether the two zero blocks of the end-of-archive marker were
// read. It also bounds each member by the bytes left in the file.
type tarWalk struct {
	name    string
	size    int64 // the file's size
	members int
	last    string // the last member's name
	end     int64  // offset where the last member's padded data end
}

// member checks header h, whose data start at offset at (archive/tar has
// read every header block before it), and records its extent.
func (w *tarWalk) member(h *tar.Header, at int64) error {
	w.members++
	w.last = h.Name
	if isSparse(h) {
		return fmt.Errorf("%w: shard %s: member %d (%q) is a sparse file (declared size %d); sparse members are not supported",
			ErrFormat, w.name, w.members, h.Name, h.Size)
	}
	n := h.Size
	switch h.Typeflag {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		n = 0 // header-only types: archive/tar reads no data for them
	}
	if n > w.size-at {
		return fmt.Errorf("%w: shard %s: member %d (%q) declares %d bytes, but the file has %d left (truncated?)",
			ErrFormat, w.name, w.members, h.Name, n, max(w.size-at, 0))
	}
	w.end = at + (n+tarBlock-1)/tarBlock*tarBlock
	return nil
}

// finish checks, once archive/tar reported the end at offset at, that it
// read the end-of-archive marker there.
func (w *tarWalk) finish(at int64) error {
	if at-w.end >= 2*tarBlock {
		return nil
	}
	if w.members == 0 {
		return fmt.Errorf("%w: shard %s: truncated: no end-of-archive marker (and no member)", ErrFormat, w.name)
	}
	return fmt.Errorf("%w: shard %s: truncated: no end-of-archive marker after member %d (%q)", ErrFormat, w.name, w.members, w.last)
}

// tarCount is the sample bookkeeping both passes over a tar share.
type tarCount struct {
	key                        string
	n                          int // samples begun
	hasInput, hasLabel, hasTgt bool
	bytes                      int64 // bytes of the members read for the current sample
}

func openTarShard(p string, maxSample int64) (*tarShard, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("data: shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("data: shard: %w", err)
	}
	s := &tarShard{name: p}
	walk := tarWalk{name: p, size: st.Size()}
	tr := tar.NewReader(f) // *os.File seeks past member data: only headers are read
	var c tarCount
	labels, targets := 0, 0 // samples with a label / a target
	noLabel, noTarget := -1, -1
	var noLabelKey, noTargetKey string
	recorded := -1 // the sample count WriteShards recorded, if any
	seen := map[string]bool{}
	end := func() error {
		if c.key == "" {
			return nil
		}
		if !c.hasInput {
			return fmt.Errorf("%w: shard %s: sample %q has no input member (KEY.npy or KEY.input.npy)", ErrFormat, p, c.key)
		}
		if c.hasLabel {
			labels++
		} else if noLabel < 0 {
			noLabel, noLabelKey = c.n-1, c.key
		}
		if c.hasTgt {
			targets++
		} else if noTarget < 0 {
			noTarget, noTargetKey = c.n-1, c.key
		}
		return nil
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: shard %s: after sample %d: %w", ErrFormat, p, c.n, err)
		}
		at, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, fmt.Errorf("data: shard %s: %w", p, err)
		}
		if err := walk.member(h, at); err != nil {
			return nil, err
		}
		if walk.members == 1 {
			if v, ok := h.PAXRecords[tarSamplesRecord]; ok {
				if recorded, err = strconv.Atoi(v); err != nil || recorded < 0 {
					return nil, fmt.Errorf("%w: shard %s: record %s=%q is not a sample count", ErrFormat, p, tarSamplesRecord, v)
				}
			}
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		k, ext := tarKey(h.Name)
		if k != c.key {
			if err := end(); err != nil {
				return nil, err
			}
			if seen[k] {
				return nil, fmt.Errorf("%w: shard %s: the members of sample %q are not consecutive (write each sample's files together)", ErrFormat, p, k)
			}
			seen[k] = true
			c = tarCount{key: k, n: c.n + 1}
		}
		role := memberRole(ext)
		if role == "" {
			continue
		}
		if c.bytes += h.Size; c.bytes > maxSample {
			return nil, fmt.Errorf("%w: shard %s: sample %d (%q): member %q brings its size to %d bytes, over the limit of %d (ShardMaxSampleBytes)",
				ErrFormat, p, c.n-1, k, h.Name, c.bytes, maxSample)
		}
		switch role {
		case "input":
			c.hasInput = true
			if s.in.input == nil {
				if s.in.input, err = memberShape(tr, h, p); err != nil {
					return nil, err
				}
			}
		case "label":
			c.hasLabel = true
		case "target":
			c.hasTgt = true
			if s.in.target == nil {
				if s.in.target, err = memberShape(tr, h, p); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := end(); err != nil {
		return nil, err
	}
	at, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("data: shard %s: %w", p, err)
	}
	if err := walk.finish(at); err != nil {
		return nil, err
	}
	s.n = c.n
	if recorded >= 0 && recorded != s.n {
		return nil, fmt.Errorf("%w: shard %s holds %d samples, but its writer recorded %d (%s): truncated or altered", ErrFormat, p, s.n, recorded, tarSamplesRecord)
	}
	// A shard's samples carry labels (targets) if all do; if only some do,
	// the others would silently train as class 0.
	s.in.labels, s.in.targets = s.n > 0 && labels == s.n, s.n > 0 && targets == s.n
	if labels > 0 && labels < s.n {
		return nil, fmt.Errorf("%w: shard %s: sample %d (%q) has no label (KEY.cls), but %d of the %d samples have one", ErrUnlabeled, p, noLabel, noLabelKey, labels, s.n)
	}
	if targets > 0 && targets < s.n {
		return nil, fmt.Errorf("%w: shard %s: sample %d (%q) has no target (KEY.target.npy), but %d of the %d samples have one", ErrUnlabeled, p, noTarget, noTargetKey, targets, s.n)
	}
	return s, nil
}

// memberShape reads the npy header at the start of member h (its first
// bytes only) and returns the array's shape, checked against the member's
// size.
func memberShape(r io.Reader, h *tar.Header, shard string) ([]int, error) {
	name := shard + ":" + h.Name
	nf, err := readNPYHeaderFrom(r, h.Size, name)
	if err != nil {
		return nil, err
	}
	if n, _ := checkedElems(nf.shape, math.MaxInt); n == 0 {
		return nil, fmt.Errorf("%w: %s: shape %v holds no elements", ErrFormat, name, nf.shape)
	}
	return nf.shape, nil
}

func (s *tarShard) path() string           { return s.name }
func (s *tarShard) len() int               { return s.n }
func (s *tarShard) info() shardInfo        { return s.in }
func (s *tarShard) setSpec(sp *sampleSpec) { s.spec = sp }

type tarSample struct {
	pos int
	key string
	s   Sample
	has tarCount
}

// countingReader counts the bytes archive/tar takes from r: tar reads
// exact blocks, so the count is its offset in the archive.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (s *tarShard) stream(ctx context.Context, rng *tensor.RNG, buffer int, yield func(int, Sample) bool) error {
	f, err := os.Open(s.name)
	if err != nil {
		return fmt.Errorf("data: shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("data: shard: %w", err)
	}
	// Buffered: tar reads each 512-byte header by itself.
	cr := &countingReader{r: bufio.NewReaderSize(f, 1<<20)}
	tr := tar.NewReader(cr)
	walk := tarWalk{name: s.name, size: st.Size()}
	var (
		cur     *tarSample
		pos     = -1
		pool    []tarSample // the shuffle buffer
		stopped bool
	)
	emit := func(ts tarSample) {
		if stopped {
			return
		}
		if rng == nil {
			stopped = !yield(ts.pos, ts.s)
			return
		}
		// webdataset's shuffle: hold up to buffer samples; once full, each
		// new sample evicts a random one.
		if len(pool) < buffer {
			pool = append(pool, ts)
			return
		}
		k := rng.IntN(len(pool))
		out := pool[k]
		pool[k] = ts
		stopped = !yield(out.pos, out.s)
	}
	// flush checks the sample just completed against what the index said
	// the shard's samples carry (the file may have changed since), then
	// emits it.
	flush := func() error {
		if cur == nil {
			return nil
		}
		missing := ""
		switch {
		case !cur.has.hasInput:
			missing = "input (KEY.npy)"
		case s.in.labels && !cur.has.hasLabel:
			missing = "label (KEY.cls)"
		case s.in.targets && !cur.has.hasTgt:
			missing = "target (KEY.target.npy)"
		}
		if missing != "" {
			return fmt.Errorf("%w: shard %s: sample %d (%q) has no %s", ErrFormat, s.name, cur.pos, cur.key, missing)
		}
		emit(*cur)
		cur = nil
		return nil
	}
	for !stopped {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: shard %s: after sample %d: %w", ErrFormat, s.name, pos+1, err)
		}
		if err := walk.member(h, cr.n); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		k, ext := tarKey(h.Name)
		if cur == nil || k != cur.key {
			if err := flush(); err != nil {
				return err
			}
			if pos++; pos >= s.n {
				return fmt.Errorf("%w: shard %s: more than the %d samples it held when opened (changed since?)", ErrFormat, s.name, s.n)
			}
			cur = &tarSample{pos: pos, key: k}
		}
		role := memberRole(ext)
		if role == "" {
			continue
		}
		if cur.has.bytes += h.Size; cur.has.bytes > s.spec.maxSample {
			return fmt.Errorf("%w: shard %s: sample %d (%q): member %q brings its size to %d bytes, over the limit of %d (ShardMaxSampleBytes)",
				ErrFormat, s.name, pos, k, h.Name, cur.has.bytes, s.spec.maxSample)
		}
		// Exactly the declared size, which walk.member bounded by the
		// file: never more than the file holds.
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return fmt.Errorf("%w: shard %s: member %s: %w", ErrFormat, s.name, h.Name, err)
		}
		member := s.name + ":" + h.Name
		where := func() string { return fmt.Sprintf("shard %s: sample %d (%q)", s.name, pos, k) }
		switch role {
		case "input", "target":
			a, err := parseNPY(b, member)
			if err != nil {
				return err
			}
			want := s.spec.input
			if role == "target" {
				want = s.spec.target
			}
			if want != nil && !slices.Equal(a.Shape, want) {
				return fmt.Errorf("%w: %s: %s shape %v, want %v (the dataset's first sample's, or the shape its options name)", ErrShape, where(), role, a.Shape, want)
			}
			t := a.Tensor(tensor.Float32)
			if role == "input" {
				cur.s.Input, cur.has.hasInput = t, true
			} else {
				cur.s.Target, cur.has.hasTgt = t, true
			}
		case "label":
			v, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				return fmt.Errorf("%w: %s: class index: %w", ErrFormat, member, err)
			}
			if err := s.spec.checkLabel(v, where); err != nil {
				return err
			}
			cur.s.Label, cur.has.hasLabel = v, true
		}
	}
	if !stopped {
		if err := flush(); err != nil {
			return err
		}
		// The whole file was read: it must have ended with its marker and
		// held the samples it was opened with.
		if err := walk.finish(cr.n); err != nil {
			return err
		}
		if pos+1 != s.n {
			return fmt.Errorf("%w: shard %s: %d samples, but %d when it was opened (changed since?)", ErrFormat, s.name, pos+1, s.n)
		}
	}
	if rng != nil {
		for len(pool) > 0 && !stopped {
			k := rng.IntN(len(pool))
			out := pool[k]
			pool[k] = pool[len(pool)-1]
			pool = pool[:len(pool)-1]
			stopped = !yield(out.pos, out.s)
		}
	}
	return nil
}
