package data

import (
	"bytes"
	"errors"
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
