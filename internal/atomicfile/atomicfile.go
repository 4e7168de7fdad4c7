// Package atomicfile writes a file so that a reader, or a crash at any
// moment, sees either the old file or the complete new one, never a mix:
// the bytes go to a temporary file in the same directory, which is
// fsynced, renamed over the path, and the directory fsynced so that the
// rename itself is durable. Checkpoints and data shards are written this
// way.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes path from what write produces, through a temporary file in
// path's directory named by pattern (os.CreateTemp's; the caller's marker
// lets it recognise files a killed writer left behind). The file gets mode
// 0644. On error the temporary file is removed and path is untouched; the
// error names the step that failed but not path (callers add it).
func Write(path, pattern string, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := &File{Writer: bufio.NewWriterSize(&writeback{f: f}, 1<<20), f: f}
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// File is what Write hands its write function: a buffered writer on the
// temporary file that can also patch bytes already written (WriteAt
// flushes first), so a format whose header holds a digest of what follows
// can write the header, stream the rest once while hashing it, then fill
// the digest in, instead of reading its data twice.
type File struct {
	*bufio.Writer
	f *os.File
}

// writeback writes to f and asks the kernel to start writing each
// writebackEvery bytes to the disk as soon as they are in the page cache,
// so that the disk works while the caller still produces (and hashes) the
// rest, and the final fsync only waits for the tail. Without it every byte
// waits in the page cache for the fsync: for a 500 MB checkpoint on a
// virtual disk that fsync took 0.3 s on 2026-11-29, after the writes.
type writeback struct {
	f            *os.File
	n, requested int64
}

// writebackEvery is the granularity of the early writeback requests: large
// enough that the extra system calls cost nothing (one per 8 MiB), small
// enough that the disk starts within a few milliseconds of writing.
const writebackEvery = 8 << 20

func (w *writeback) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.n += int64(n)
	if w.n-w.requested >= writebackEvery {
		startWriteback(w.f, w.requested, w.n-w.requested)
		w.requested = w.n
	}
	return n, err
}

// WriteAt flushes the buffer and writes b at offset off of the file.
func (w *File) WriteAt(b []byte, off int64) (int, error) {
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return w.f.WriteAt(b, off)
}
