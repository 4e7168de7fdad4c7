package mmapfile

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestOpenViewClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.bin")
	if err := os.WriteFile(path, []byte{1, 0, 0xff, 0xff, 0x34, 0x12}, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := Uint16s(f.Bytes()); !slices.Equal(got, []uint16{1, 0xffff, 0x1234}) {
		t.Fatalf("Uint16s = %#x", got)
	}
	if runtime.GOOS == "linux" && !mapped(t, path) {
		t.Fatalf("%s is not in /proc/self/maps while open", path)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && mapped(t, path) {
		t.Fatalf("%s is still mapped after Close", path)
	}
	if err := f.Close(); err != nil || f.Bytes() != nil {
		t.Fatalf("second Close: %v, Bytes %v", err, f.Bytes())
	}
}

func TestOpenEmptyAndMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.bin")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil || len(f.Bytes()) != 0 || Uint16s(f.Bytes()) != nil {
		t.Fatalf("empty file: %v, %d bytes", err, len(f.Bytes()))
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.bin")); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestUint16sUnaligned(t *testing.T) {
	b := []byte{0, 1, 0, 2, 0}
	if got := Uint16s(b[1:]); !slices.Equal(got, []uint16{1, 2}) {
		t.Fatalf("unaligned Uint16s = %v", got)
	}
}

// mapped reports whether /proc/self/maps lists path.
func mapped(t *testing.T, path string) bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	return strings.Contains(string(maps), path)
}
