package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o600))
	require.NoError(t, Write(p, ".f.tmp-*", func(w io.Writer) error {
		_, err := w.Write([]byte("new contents"))
		return err
	}))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "new contents", string(b))
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "no temporary file is left")
}

// A failing writer leaves the old file as it was and no temporary file.
func TestWriteFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o600))
	boom := errors.New("boom")
	err := Write(p, ".f.tmp-*", func(w io.Writer) error {
		if _, err := w.Write(make([]byte, 3<<20)); err != nil { // past the buffer: bytes reach the temp file
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "the temporary file is removed")
}

// A file longer than several early-writeback requests, patched with
// WriteAt at the end (as checkpoint's digest is), reads back exactly.
func TestWriteAcrossWritebackRequests(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := make([]byte, 3*writebackEvery+12345)
	for i := range want {
		want[i] = byte(i * 7)
	}
	require.NoError(t, Write(p, ".f.tmp-*", func(w io.Writer) error {
		for b := want; len(b) > 0; b = b[min(len(b), 1000003):] { // odd sizes: requests fall mid-write
			if _, err := w.Write(b[:min(len(b), 1000003)]); err != nil {
				return err
			}
		}
		_, err := w.(*File).WriteAt([]byte("patched"), 5)
		return err
	}))
	copy(want[5:], "patched")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}
