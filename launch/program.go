package launch

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// program is a resolved PROGRAM: an executable path, plus the temp dir to
// remove when PROGRAM was built from source.
type program struct {
	path    string
	tempDir string
}

func (p *program) cleanup() {
	if p.tempDir != "" {
		_ = os.RemoveAll(p.tempDir)
	}
}

// resolveProgram finds or builds PROGRAM. Errors match ErrProgram.
//   - a directory, or a .go file: built once with `go build` into a temp dir;
//   - a file: used as is (must be executable);
//   - a bare name: looked up on $PATH.
func resolveProgram(ctx context.Context, name string, buildFlags []string, log func(string, ...any)) (*program, error) {
	st, err := os.Stat(name)
	switch {
	case err == nil && (st.IsDir() || strings.HasSuffix(name, ".go")):
		return buildProgram(ctx, name, st.IsDir(), buildFlags, log)
	case err == nil:
		if st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: %s is not executable (chmod +x it, or pass a Go package directory)", ErrProgram, name)
		}
		abs, err := filepath.Abs(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrProgram, name, err)
		}
		return &program{path: abs}, nil
	case !strings.ContainsRune(name, filepath.Separator):
		p, lerr := exec.LookPath(name)
		if lerr == nil {
			return &program{path: p}, nil
		}
	}
	return nil, fmt.Errorf("%w: %s: no such file, directory or command", ErrProgram, name)
}

func buildProgram(ctx context.Context, src string, isDir bool, buildFlags []string, log func(string, ...any)) (*program, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProgram, src, err)
	}
	dir, target := abs, "."
	if !isDir {
		dir, target = filepath.Dir(abs), filepath.Base(abs)
	}
	tmp, err := os.MkdirTemp("", "ddprun-build-*")
	if err != nil {
		return nil, fmt.Errorf("%w: temp dir for the build: %w", ErrProgram, err)
	}
	base := filepath.Base(abs)
	base = strings.TrimSuffix(base, ".go")
	out := filepath.Join(tmp, base)
	args := append([]string{"build", "-o", out}, buildFlags...)
	args = append(args, target)
	log("building %s (go %s)", src, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(tmp)
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s is a Go package but the go command is not on $PATH", ErrProgram, src)
		}
		return nil, fmt.Errorf("%w: %s does not build (%v):\n%s", ErrProgram, src, err, strings.TrimRight(msg.String(), "\n"))
	}
	return &program{path: out, tempDir: tmp}, nil
}

// needsGPU reports whether a Go binary links gorgonia.org/cu, whose init
// exits the process when no GPU is present. goddp's own cuda build does
// not (it loads CUDA at run time and fails with an error), so a binary
// built with the cuda tag may run on a CPU. Non-Go programs report false.
func needsGPU(path string) bool {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return false
	}
	for _, d := range info.Deps {
		if d.Path == "gorgonia.org/cu" {
			return true
		}
	}
	return false
}

// checkGPU fails with ErrNoGPU when PROGRAM needs a GPU and NVML sees none.
func checkGPU(path string, force bool) error {
	why := ""
	switch {
	case force:
		why = "a GPU was required (--require-gpu or " + EnvRequiresGPU + "=1)"
	case envTrue(EnvRequiresGPU):
		why = EnvRequiresGPU + "=1"
	case needsGPU(path):
		why = filepath.Base(path) + " links gorgonia.org/cu, whose init exits without a GPU"
	default:
		return nil
	}
	n, err := GPUCount()
	if err != nil {
		return fmt.Errorf("%w: %s, but %w", ErrNoGPU, why, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s, but NVML reports 0 devices", ErrNoGPU, why)
	}
	return nil
}
