package data

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/goddp/goddp/tensor"
)

// tarShard is a tar file in webdataset's layout: each sample is a run of
// consecutive members sharing a key.
type tarShard struct {
	name string
	n    int
}

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

func openTarShard(p string) (*tarShard, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("data: shard: %w", err)
	}
	defer f.Close()
	s := &tarShard{name: p}
	tr := tar.NewReader(f) // *os.File seeks past member data: only headers are read
	key, hasInput := "", false
	seen := map[string]bool{}
	end := func() error {
		if key != "" && !hasInput {
			return fmt.Errorf("%w: shard %s: sample %q has no input member (KEY.npy or KEY.input.npy)", ErrFormat, p, key)
		}
		return nil
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: shard %s: after sample %d: %w", ErrFormat, p, s.n, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		k, ext := tarKey(h.Name)
		if k != key {
			if err := end(); err != nil {
				return nil, err
			}
			if seen[k] {
				return nil, fmt.Errorf("%w: shard %s: the members of sample %q are not consecutive (write each sample's files together)", ErrFormat, p, k)
			}
			seen[k] = true
			key, hasInput = k, false
			s.n++
		}
		if memberRole(ext) == "input" {
			hasInput = true
		}
	}
	if err := end(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *tarShard) path() string { return s.name }
func (s *tarShard) len() int     { return s.n }

type tarSample struct {
	pos int
	s   Sample
}

func (s *tarShard) stream(ctx context.Context, rng *tensor.RNG, buffer int, yield func(int, Sample) bool) error {
	f, err := os.Open(s.name)
	if err != nil {
		return fmt.Errorf("data: shard: %w", err)
	}
	defer f.Close()
	// Buffered: tar reads each 512-byte header by itself.
	tr := tar.NewReader(bufio.NewReaderSize(f, 1<<20))
	var (
		cur     *tarSample
		key     string
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
	flush := func() {
		if cur != nil {
			emit(*cur)
			cur = nil
		}
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
		if h.Typeflag != tar.TypeReg {
			continue
		}
		k, ext := tarKey(h.Name)
		if k != key {
			flush()
			key, pos = k, pos+1
			cur = &tarSample{pos: pos}
		}
		role := memberRole(ext)
		if role == "" {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("%w: shard %s: member %s: %w", ErrFormat, s.name, h.Name, err)
		}
		member := s.name + ":" + h.Name
		switch role {
		case "input", "target":
			a, err := parseNPY(b, member)
			if err != nil {
				return err
			}
			t := a.Tensor(tensor.Float32)
			if role == "input" {
				cur.s.Input = t
			} else {
				cur.s.Target = t
			}
		case "label":
			v, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				return fmt.Errorf("%w: %s: class index: %w", ErrFormat, member, err)
			}
			cur.s.Label = v
		}
	}
	flush()
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
