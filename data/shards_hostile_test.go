package data

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// Hostile and damaged shard files, built here as bytes: each must fail with
// an error naming the file at OpenShards (or, for what only decoding can
// see, naming the file and the sample), never by exhausting memory or
// dropping samples.

func open1(paths ...string) func(opts ...ShardOption) (*ShardDataset, error) {
	return func(opts ...ShardOption) (*ShardDataset, error) {
		return OpenShards(paths, append([]ShardOption{ShardRank(0), ShardReplicas(1), ShardShuffle(false)}, opts...)...)
	}
}

// readAll streams ds in batches of one (so that nothing but the shard
// reader can object) and returns the samples read and the first error.
func readAll(t *testing.T, ds *ShardDataset) (int, error) {
	t.Helper()
	l, err := NewStreamLoader(ds, BatchSize(1))
	require.NoError(t, err)
	n := 0
	for b, err := range l.All(context.Background()) {
		if err != nil {
			return n, err
		}
		n += b.Size()
	}
	return n, nil
}

// npyOfSize is an .npy preamble and header for dict, padded as numpy pads
// it to total bytes, with no data.
func npyOfSize(dict string, total int) []byte {
	pad := total - 10 - len(dict) - 1
	return npyHeaderBytes(1, dict+strings.Repeat(" ", max(pad, 0))+"\n")
}

func TestShardNPYZeroByteRowsAndHugeShapes(t *testing.T) {
	for _, tc := range []struct {
		name, dict string
		body       int
		want       string
	}{
		// 128 bytes declaring 2^40 rows of nothing: before, a permutation
		// of 2^40 ints killed the process ("fatal error: out of memory").
		{"2^40 empty rows", "{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776, 0), }", 0, "holds no elements"},
		{"no rows of nothing", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 0), }", 0, "holds no elements"},
		{"3 empty rows", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0, 7), }", 0, "holds no elements"},
		{"overflowing product", "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }", 0, "needs more than an int counts"},
		{"overflowing row of no rows", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }", 0, "holds no elements (or too many)"},
		{"more than the file", "{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 4), }", 64, "needs 16000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(npyOfSize(tc.dict, 128), make([]byte, tc.body)...)
			p := writeFile(t, "x.npy", b)
			var lb bytes.Buffer
			require.NoError(t, WriteNPY(&lb, &Array{Shape: []int{0}, Data: []int64{}}))
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(p), "x.labels.npy"), lb.Bytes(), 0o644))
			_, err := open1(p)(ShardUnlabeled(true))
			require.ErrorIs(t, err, ErrFormat)
			require.ErrorContains(t, err, p)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// Targets whose rows hold nothing are refused too.
	dir := t.TempDir()
	p := filepath.Join(dir, "y.npy")
	writeNPYShard(t, p, 0, 4, 2)
	require.NoError(t, os.Remove(filepath.Join(dir, "y.labels.npy")))
	tp := filepath.Join(dir, "y.targets.npy")
	require.NoError(t, os.WriteFile(tp, npyOfSize("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 0), }", 128), 0o644))
	_, err := open1(p)()
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, tp)
}

// A shard without rows is read without allocating for its declared row
// (which no data bound): (0, 2^28) floats made a 1 GiB read buffer.
func TestShardNPYEmptyShardAllocatesNothing(t *testing.T) {
	p := writeFile(t, "e.npy", npyOfSize("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 268435456), }", 128))
	ds, err := open1(p)(ShardUnlabeled(true))
	require.NoError(t, err)
	require.Equal(t, 0, ds.Len())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n, err := readAll(t, ds)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated to read an empty shard")
}

// tarBlockOf is one raw 512-byte tar header: archive/tar's writer refuses
// to write the sparse headers these tests need.
func tarBlockOf(name string, typeflag byte, size int64, gnu bool, edit func(b []byte)) []byte {
	b := make([]byte, 512)
	copy(b, name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], "00000000000\x00")
	b[156] = typeflag
	if gnu {
		copy(b[257:], "ustar  \x00")
	} else {
		copy(b[257:], "ustar\x0000")
	}
	if edit != nil {
		edit(b)
	}
	copy(b[148:], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// padBlock pads b to a whole number of tar blocks.
func padBlock(b []byte) []byte {
	return append(b, make([]byte, (512-len(b)%512)%512)...)
}

// paxRecord is one PAX extended-header record ("LEN key=value\n", LEN
// counting itself).
func paxRecord(k, v string) string {
	rest := " " + k + "=" + v + "\n"
	n := len(rest) + 1
	for len(fmt.Sprint(n))+len(rest) != n {
		n++
	}
	return fmt.Sprint(n) + rest
}

// tarOf writes n good samples (KEY.npy, KEY.cls, KEY.json) with tar.Writer
// and returns the bytes, with the end-of-archive marker when closed.
func tarOf(t *testing.T, n, width int, closed bool) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.tar")
	writeTarShard(t, p, 0, n, width)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	if closed {
		return b
	}
	// Cut after the last member's padded data: what a writer killed
	// between members, or a copy cut at a boundary, leaves.
	r := bytes.NewReader(b)
	tr := tar.NewReader(r)
	var end int64
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		at := int64(len(b)) - int64(r.Len()) // archive/tar reads exact blocks from a bytes.Reader
		end = at + (h.Size+511)/512*512
	}
	return b[:end]
}

func TestShardTarSparseMembersRefused(t *testing.T) {
	good := tarOf(t, 1, 3, false) // one good sample, then the sparse member, then the marker
	marker := make([]byte, 1024)

	// PAX sparse (format 0.1): 1 byte stored, 2^36 declared; before, the
	// reader expanded the holes and io.ReadAll ran the process out of memory.
	pax := paxRecord("GNU.sparse.size", "68719476736") + paxRecord("GNU.sparse.numblocks", "1") +
		paxRecord("GNU.sparse.map", "68719476735,1") + paxRecord("GNU.sparse.name", "000001.npy")
	var paxTar []byte
	paxTar = append(paxTar, good...)
	paxTar = append(paxTar, tarBlockOf("PaxHeaders/x", 'x', int64(len(pax)), false, nil)...)
	paxTar = append(paxTar, padBlock([]byte(pax))...)
	paxTar = append(paxTar, tarBlockOf("GNUSparseFile.0/000001.npy", '0', 1, false, nil)...)
	paxTar = append(paxTar, padBlock([]byte{1})...)
	paxTar = append(paxTar, marker...)

	// GNU's old sparse type 'S', declaring 2^36 bytes in base-256; before,
	// such a member was skipped without a word.
	var gnuTar []byte
	gnuTar = append(gnuTar, good...)
	gnuTar = append(gnuTar, tarBlockOf("s/000000.json", 'S', 1, true, func(b []byte) {
		copy(b[386:], "00000000000\x00") // sparse entry 0: offset 0
		copy(b[398:], "00000000001\x00") // length 1
		b[483] = 0x80                    // real size, base-256: 2^36
		b[491] = 0x10
	})...)
	gnuTar = append(gnuTar, padBlock([]byte{1})...)
	gnuTar = append(gnuTar, marker...)

	for name, b := range map[string][]byte{"pax": paxTar, "gnu": gnuTar} {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, "sparse.tar", b)
			_, err := open1(p)()
			require.ErrorIs(t, err, ErrFormat)
			require.ErrorContains(t, err, p)
			require.ErrorContains(t, err, "sparse")
		})
	}
}

func TestShardTarMemberSizeBounds(t *testing.T) {
	// A header declaring a GiB in a file of a few KB.
	b := append(tarOf(t, 2, 3, false), tarBlockOf("s/000002.npy", '0', 1<<30, false, nil)...)
	b = append(b, make([]byte, 2048)...)
	p := writeFile(t, "big.tar", b)
	_, err := open1(p)()
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, `member 7 ("s/000002.npy") declares 1073741824 bytes, but the file has 2048 left`)

	// A sample over ShardMaxSampleBytes: an input of 128+4*64 bytes.
	p = writeFile(t, "wide.tar", tarOf(t, 3, 64, true))
	_, err = open1(p)(ShardMaxSampleBytes(300))
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, `sample 0 ("s/000000")`)
	require.ErrorContains(t, err, "ShardMaxSampleBytes")
	ds, err := open1(p)(ShardMaxSampleBytes(400))
	require.NoError(t, err)
	n, err := readAll(t, ds)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	_, err = open1(p)(ShardMaxSampleBytes(0))
	require.ErrorIs(t, err, ErrConfig)
}

func TestShardTarTruncation(t *testing.T) {
	full := tarOf(t, 10, 3, true)
	p := writeFile(t, "full.tar", full)
	ds, err := open1(p)()
	require.NoError(t, err)
	require.Equal(t, 10, ds.Len())

	// Cut at a member boundary: before, the 5 samples left were trained on
	// and the other 5 dropped without a word.
	cut := tarOf(t, 5, 3, false)
	for name, b := range map[string][]byte{
		"at a boundary":    cut,
		"one zero block":   append(append([]byte(nil), cut...), make([]byte, 512)...),
		"nothing at all":   nil,
		"no member, block": make([]byte, 512),
	} {
		t.Run(name, func(t *testing.T) {
			q := writeFile(t, "cut.tar", b)
			_, err := open1(q)()
			require.ErrorIs(t, err, ErrFormat)
			require.ErrorContains(t, err, q)
			if len(b) > 512 {
				require.ErrorContains(t, err, `truncated: no end-of-archive marker after member 15 ("s/000004.json")`)
			} else {
				require.ErrorContains(t, err, "truncated: no end-of-archive marker")
			}
		})
	}

	// Cut after OpenShards indexed it: the epoch fails naming the file.
	ds, err = open1(p)()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, cut, 0o644))
	n, err := readAll(t, ds)
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, "truncated")
	require.Equal(t, 5, n)

	// Cut, then closed again with a fresh marker (what a tool that "repairs"
	// the tar leaves): the count WriteShards recorded still tells.
	src, err := NewLabeledDataset(rowsOf(10, 3), make([]int, 10))
	require.NoError(t, err)
	paths, err := WriteShards(src, t.TempDir(), "w", 10, ShardTar)
	require.NoError(t, err)
	wrote, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(wrote))
	for range 10 { // 5 samples of input and label
		h, err := tr.Next()
		require.NoError(t, err)
		require.NoError(t, tw.WriteHeader(h))
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		_, err = tw.Write(body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	q := writeFile(t, "recut.tar", out.Bytes())
	_, err = open1(q)()
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, q)
	require.ErrorContains(t, err, "holds 5 samples, but its writer recorded 10")
}

// rowsOf is an [n, width] tensor of distinct values.
func rowsOf(n, width int) *tensor.Tensor {
	x := make([]float32, n*width)
	for i := range x {
		x[i] = float32(i)
	}
	return tensor.FromF32(x, n, width)
}

func TestShardLabelsRequired(t *testing.T) {
	dir := t.TempDir()
	np := filepath.Join(dir, "a.npy")
	writeNPYShard(t, np, 0, 4, 2)
	require.NoError(t, os.Remove(filepath.Join(dir, "a.labels.npy")))

	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for i := range 3 {
		var b bytes.Buffer
		require.NoError(t, WriteNPY(&b, &Array{Shape: []int{2}, Data: []float32{1, 2}}))
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d.npy", i), Mode: 0o644, Size: int64(b.Len()), Typeflag: tar.TypeReg}))
		_, _ = tw.Write(b.Bytes())
	}
	require.NoError(t, tw.Close())
	tp := writeFile(t, "b.tar", tb.Bytes())

	// Before, both trained with every label 0, silently.
	for _, p := range []string{np, tp} {
		_, err := open1(p)()
		require.ErrorIs(t, err, ErrUnlabeled)
		require.ErrorContains(t, err, p)
		require.ErrorContains(t, err, "ShardUnlabeled")
		_, err = open1(p)(ShardLabels(10))
		require.ErrorIs(t, err, ErrUnlabeled)
		require.ErrorContains(t, err, p)

		ds, err := open1(p)(ShardUnlabeled(true))
		require.NoError(t, err)
		_, err = readAll(t, ds)
		require.NoError(t, err)
		_, err = open1(p)(ShardUnlabeled(true), ShardLabels(10))
		require.NoError(t, err)
	}

	// Some samples of a tar labelled, others not.
	tb.Reset()
	tw = tar.NewWriter(&tb)
	for i := range 3 {
		var b bytes.Buffer
		require.NoError(t, WriteNPY(&b, &Array{Shape: []int{2}, Data: []float32{1, 2}}))
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d.npy", i), Mode: 0o644, Size: int64(b.Len()), Typeflag: tar.TypeReg}))
		_, _ = tw.Write(b.Bytes())
		if i != 1 {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d.cls", i), Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}))
			_, _ = tw.Write([]byte("3"))
		}
	}
	require.NoError(t, tw.Close())
	pp := writeFile(t, "c.tar", tb.Bytes())
	_, err := open1(pp)(ShardUnlabeled(true))
	require.ErrorIs(t, err, ErrUnlabeled)
	require.ErrorContains(t, err, `sample 1 ("000001") has no label (KEY.cls), but 2 of the 3 samples have one`)

	// Labels wanted, targets given; and shards of different kinds.
	tg := filepath.Join(dir, "t.npy")
	writeNPYShard(t, tg, 0, 4, 2)
	require.NoError(t, os.Rename(filepath.Join(dir, "t.labels.npy"), filepath.Join(dir, "t.targets.npy")))
	_, err = open1(tg)(ShardLabels(10))
	require.ErrorIs(t, err, ErrUnlabeled)
	require.ErrorContains(t, err, tg)
	lb := filepath.Join(dir, "l.npy")
	writeNPYShard(t, lb, 0, 4, 2)
	_, err = open1(lb, tg)()
	require.ErrorIs(t, err, ErrFormat)
	require.ErrorContains(t, err, "shard "+tg+" carries targets but shard "+lb+" carries labels")
	_, err = open1(lb)(ShardLabels(10), ShardTargets())
	require.ErrorIs(t, err, ErrConfig)
}

func TestShardLabelOutOfRange(t *testing.T) {
	for _, v := range []int64{1000, 10, -1, 1 << 62} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			dir := t.TempDir()
			np := filepath.Join(dir, "a.npy")
			writeNPYShard(t, np, 0, 4, 2) // labels 0, 1, 2, 3
			var lb bytes.Buffer
			require.NoError(t, WriteNPY(&lb, &Array{Shape: []int{4}, Data: []int64{0, 1, v, 3}}))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.labels.npy"), lb.Bytes(), 0o644))

			tp := filepath.Join(dir, "b.tar")
			writeTarShard(t, tp, 0, 4, 2)
			b, err := os.ReadFile(tp)
			require.NoError(t, err)
			var out bytes.Buffer
			tw := tar.NewWriter(&out)
			tr := tar.NewReader(bytes.NewReader(b))
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				body, err := io.ReadAll(tr)
				require.NoError(t, err)
				if h.Name == "s/000002.cls" {
					body = []byte(fmt.Sprint(v))
					h.Size = int64(len(body))
				}
				require.NoError(t, tw.WriteHeader(h))
				_, _ = tw.Write(body)
			}
			require.NoError(t, tw.Close())
			require.NoError(t, os.WriteFile(tp, out.Bytes(), 0o644))

			for p, where := range map[string]string{np: "row 2 (a.labels.npy)", tp: `sample 2 ("s/000002")`} {
				// Without the class count the label passes through, as before.
				ds, err := open1(p)()
				require.NoError(t, err)
				n, err := readAll(t, ds)
				require.NoError(t, err)
				require.Equal(t, 4, n)

				ds, err = open1(p)(ShardLabels(10))
				require.NoError(t, err)
				_, err = readAll(t, ds)
				require.ErrorIs(t, err, ErrLabel)
				require.ErrorContains(t, err, fmt.Sprintf("shard %s: %s: label %d outside [0, 10)", p, where, v))
			}
		})
	}
}

func TestShardInputShapes(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	writeNPYShard(t, a, 0, 4, 3)
	writeNPYShard(t, b, 4, 4, 4)
	_, err := open1(a, b)()
	require.ErrorIs(t, err, ErrShape)
	require.ErrorContains(t, err, "shard "+b+": input shape [4], but shard "+a+"'s is [3]")
	_, err = open1(a)(ShardInputShape(4))
	require.ErrorIs(t, err, ErrShape)
	require.ErrorContains(t, err, "shard "+a+": input shape [3], the model takes [4]")
	_, err = open1(a)(ShardInputShape(0))
	require.ErrorIs(t, err, ErrConfig)

	// A tar whose sample 2 is wider than the others: before, with batches
	// of one, it reached the model (a panic inside Linear).
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for i := range 4 {
		var x bytes.Buffer
		w := 3
		if i == 2 {
			w = 5
		}
		require.NoError(t, WriteNPY(&x, &Array{Shape: []int{w}, Data: make([]float32, w)}))
		for _, m := range []struct {
			ext  string
			body []byte
		}{{"npy", x.Bytes()}, {"cls", []byte("1")}} {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d.%s", i, m.ext), Mode: 0o644, Size: int64(len(m.body)), Typeflag: tar.TypeReg}))
			_, _ = tw.Write(m.body)
		}
	}
	require.NoError(t, tw.Close())
	tp := writeFile(t, "w.tar", tb.Bytes())
	ds, err := open1(tp)()
	require.NoError(t, err)
	n, err := readAll(t, ds)
	require.ErrorIs(t, err, ErrShape)
	require.ErrorContains(t, err, fmt.Sprintf(`shard %s: sample 2 ("000002"): input shape [5], want [3]`, tp))
	require.Equal(t, 2, n)
	_, err = open1(tp)(ShardInputShape(5))
	require.ErrorIs(t, err, ErrShape)
	require.False(t, errors.Is(err, ErrFormat))
}
