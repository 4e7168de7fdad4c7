package tokenshards

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Input is one source of text: Name is how errors call it, and Open is
// called once, when Write reaches it.
type Input struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// Inputs turns command-line arguments into inputs: "-" (or no argument)
// is stdin, a pattern with glob characters must match at least one file,
// anything else is a file (a directory is an error). A gzip stream (.gz,
// or dictd's .dz) is decompressed, whatever its name.
func Inputs(args []string, stdin io.Reader) ([]Input, error) {
	if len(args) == 0 {
		args = []string{"-"}
	}
	var inputs []Input
	for _, a := range args {
		if a == "-" {
			inputs = append(inputs, Input{"standard input", func() (io.ReadCloser, error) {
				return maybeGunzip(io.NopCloser(stdin), "standard input")
			}})
			continue
		}
		paths := []string{a}
		if strings.ContainsAny(a, "*?[") {
			m, err := filepath.Glob(a)
			if err != nil {
				return nil, fmt.Errorf("tokenshards: pattern %q: %w", a, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("tokenshards: pattern %q matches no file", a)
			}
			paths = m
		}
		for _, p := range paths {
			if st, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("tokenshards: input: %w", err)
			} else if st.IsDir() {
				return nil, fmt.Errorf("tokenshards: input %s is a directory; give its files, e.g. %s", p, filepath.Join(p, "*.txt"))
			}
			inputs = append(inputs, Input{p, func() (io.ReadCloser, error) {
				f, err := os.Open(p)
				if err != nil {
					return nil, fmt.Errorf("tokenshards: input: %w", err)
				}
				return maybeGunzip(f, p)
			}})
		}
	}
	return inputs, nil
}

// maybeGunzip decompresses rc if it starts with gzip's magic bytes.
func maybeGunzip(rc io.ReadCloser, name string) (io.ReadCloser, error) {
	br := bufio.NewReader(rc)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		rc.Close()
		return nil, fmt.Errorf("tokenshards: reading %s: %w", name, err)
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return struct {
			io.Reader
			io.Closer
		}{br, rc}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("tokenshards: %s: gzip: %w", name, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{gzipReader{zr}, rc}, nil
}

// gzipReader says "gzip" in decompression errors (the splitter adds the
// input's name).
type gzipReader struct{ r io.Reader }

func (g gzipReader) Read(p []byte) (int, error) {
	k, err := g.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("gzip: %w", err)
	}
	return k, err
}
