package atomicfile_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/goddp/goddp/internal/atomicfile"
)

func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "config.json")
	err := atomicfile.Write(p, ".config.json.tmp-*", func(w io.Writer) error {
		_, err := io.WriteString(w, `{"lr": 0.01}`)
		return err
	})
	b, _ := os.ReadFile(p)
	fmt.Println(err, string(b))
	// Output: <nil> {"lr": 0.01}
}
