package checkpoint

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// tempMarker is part of every temporary file name, so that files left by a
// killed save are recognised (and never mistaken for checkpoints); the
// writer's identity follows it (see writer.go).
const tempMarker = ".tmp-"

// WriteFileAtomic writes path so that a reader (or a crash at any moment)
// sees either the old file or the complete new one, never a mix: write to a
// temporary file in the same directory, fsync it, rename it over path, and
// fsync the directory so the rename itself is durable. On error the
// temporary file is removed.
func WriteFileAtomic(path string, write func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, self().tempPattern(base))
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("checkpoint: save %s: fsync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: save %s: fsync directory: %w", path, err)
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

func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}
