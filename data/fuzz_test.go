package data

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets check that the parsers never panic, that every failure is
// ErrFormat (or a config error for CSV), and that what they return is never
// larger than what the input holds (no allocation driven by a hostile header).
// Run one with e.g.: go test -run XXX -fuzz FuzzNPY -fuzztime 30s ./data/

func FuzzCSV(f *testing.F) {
	for _, s := range []string{"a,b,c\n1,2,3\n4,5,6\n", "1,2\n3\n", "\"1\",2\n", "x\n", "1;2\n", "", "1e309,NaN,-Inf\n"} {
		f.Add([]byte(s), true, "-1", false)
		f.Add([]byte(s), false, "0", true)
	}
	f.Fuzz(func(t *testing.T, in []byte, header bool, target string, labels bool) {
		ds, err := DecodeCSV(bytes.NewReader(in), "fuzz.csv", CSVOptions{Header: header, Target: target, Labels: labels})
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrConfig) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if ds.Inputs().Numel() > len(in) {
			t.Fatalf("%d input values from %d bytes", ds.Inputs().Numel(), len(in))
		}
	})
}

func FuzzIDX(f *testing.F) {
	f.Add(idxBytes(0x08, []uint32{2, 2}, []byte{1, 2, 3, 4}))
	f.Add(idxBytes(0x0D, []uint32{1}, []byte{0x3f, 0x80, 0, 0}))
	f.Add(idxBytes(0x0E, []uint32{0}, nil))
	f.Add(idxBytes(0x0B, []uint32{1 << 30, 4}, []byte{1}))
	f.Add(idxBytes(0x08, []uint32{0, 0xFFFFFFFF}, nil)) // a zero, then what is -1 as int32
	f.Add(idxBytes(0x0D, []uint32{0xFFFFFFFF, 0}, nil))
	f.Add(idxBytes(0x08, []uint32{3, 0, 0x80000000}, nil))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := DecodeIDX(bytes.NewReader(in), "fuzz.idx")
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if len(in) >= 2 && in[0] == 0x1f && in[1] == 0x8b {
			return // decompressed size is not bounded by the input
		}
		if a.Len() > len(in) {
			t.Fatalf("%d elements from %d bytes", a.Len(), len(in))
		}
	})
}

func FuzzNPY(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteNPY(&buf, &Array{Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}})
	f.Add(buf.Bytes())
	f.Add(npyHeaderBytes(2, "{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }\n"))
	f.Add(npyHeaderBytes(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }"))
	f.Add(npyHeaderBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"))
	f.Add(npyHeaderBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, -1), }"))
	f.Add(npyHeaderBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 0), }"))
	f.Add(npyHeaderBytes(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 0, -9223372036854775808), }"))
	f.Add(npyHeaderBytes(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := DecodeNPY(bytes.NewReader(in), "fuzz.npy")
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if a.Len() > len(in) {
			t.Fatalf("%d elements from %d bytes", a.Len(), len(in))
		}
	})
}

// FuzzShardTar checks the tar shard reader on arbitrary files: OpenShards
// and a full epoch never panic, fail only with the package's errors, and
// yield no more input values than the file has bytes (no allocation driven
// by a declared size: sparse members, huge headers). Seeds: a good shard,
// one cut at a member boundary, and a PAX sparse member declaring 2^36
// bytes.
func FuzzShardTar(f *testing.F) {
	var good bytes.Buffer
	tw := tar.NewWriter(&good)
	for i, body := range [][]byte{npyOf([]float32{1, 2}), []byte("3"), npyOf([]float32{4, 5}), []byte("1")} {
		name := fmt.Sprintf("%06d.npy", i/2)
		if i%2 == 1 {
			name = fmt.Sprintf("%06d.cls", i/2)
		}
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(body)
	}
	_ = tw.Flush()
	f.Add(append([]byte(nil), good.Bytes()...)) // cut at a member boundary
	_ = tw.Close()
	f.Add(good.Bytes())
	pax := paxRecord("GNU.sparse.size", "68719476736") + paxRecord("GNU.sparse.map", "68719476735,1")
	sparse := append(tarBlockOf("x", 'x', int64(len(pax)), false, nil), padBlock([]byte(pax))...)
	sparse = append(sparse, tarBlockOf("000000.npy", '0', 1, false, nil)...)
	sparse = append(append(sparse, padBlock([]byte{1})...), make([]byte, 1024)...)
	f.Add(sparse)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		p := filepath.Join(dir, "fuzz.tar")
		if err := os.WriteFile(p, in, 0o644); err != nil {
			t.Fatal(err)
		}
		fuzzShard(t, p, len(in))
	})
}

// FuzzShardNPY is FuzzShardTar for an .npy shard without labels. Seeds: a
// good shard and 128 bytes declaring 2^40 rows of nothing.
func FuzzShardNPY(f *testing.F) {
	f.Add(npyOf([]float32{1, 2, 3, 4}))
	f.Add(npyOfSize("{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776, 0), }", 128))
	f.Add(npyOfSize("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }", 128))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		p := filepath.Join(dir, "fuzz.npy")
		if err := os.WriteFile(p, in, 0o644); err != nil {
			t.Fatal(err)
		}
		fuzzShard(t, p, len(in))
	})
}

func npyOf(x []float32) []byte {
	var b bytes.Buffer
	_ = WriteNPY(&b, &Array{Shape: []int{len(x)}, Data: x})
	return b.Bytes()
}

func fuzzShard(t *testing.T, p string, size int) {
	ds, err := OpenShards([]string{p}, ShardRank(0), ShardReplicas(1), ShardUnlabeled(true), ShardLabels(4))
	if err != nil {
		if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrShape) && !errors.Is(err, ErrUnlabeled) {
			t.Fatalf("unexpected error class: %v", err)
		}
		return
	}
	if ds.Len() > size {
		t.Fatalf("%d samples from %d bytes", ds.Len(), size)
	}
	l, err := NewStreamLoader(ds, BatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	values := 0
	for b, err := range l.All(context.Background()) {
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrShape) && !errors.Is(err, ErrLabel) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		values += b.Inputs.Numel()
	}
	if values > size {
		t.Fatalf("%d input values from %d bytes", values, size)
	}
}
