package checkpoint

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/goddp/goddp/internal/atomicfile"
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
func WriteFileAtomic(path string, write func(w io.Writer) error) error {
	if err := atomicfile.Write(path, self().tempPattern(filepath.Base(path)), write); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	return nil
}

func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}
