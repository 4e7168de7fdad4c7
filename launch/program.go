package launch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// program is a resolved PROGRAM: an executable path, plus the dir to remove
// at the end when PROGRAM was built into a per-run dir (no build cache).
type program struct {
	path    string
	tempDir *ownedDir
}

func (p *program) cleanup() { p.tempDir.remove() }

// builder is what building a package PROGRAM needs from the launcher.
type builder struct {
	flags []string
	// cache is the dir that keeps built binaries between runs ("": the
	// default under os.UserCacheDir).
	cache string
	// start starts the go command (the launcher's spawner, so that a
	// killed launcher takes its build with it).
	start func(*exec.Cmd) error
	log   func(string, ...any)
}

// resolveProgram finds or builds PROGRAM. Errors match ErrProgram.
//   - a directory, or a .go file: built with `go build` into the build cache;
//   - a file: used as is (must be executable);
//   - a bare name: looked up on $PATH.
func resolveProgram(ctx context.Context, name string, b builder) (*program, error) {
	st, err := os.Stat(name)
	switch {
	case err == nil && (st.IsDir() || strings.HasSuffix(name, ".go")):
		return b.build(ctx, name, st.IsDir())
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

// buildCacheRoot is where built PROGRAMs are kept by default.
func buildCacheRoot() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "goddp", "ddprun-build"), nil
}

// build builds a package PROGRAM. The binary is kept between runs, one per
// package and set of build flags, so a launcher killed with SIGKILL leaves
// no 30 MB binary in the temp dir, and a rerun of unchanged sources does
// not even relink. Each build
// goes to a scratch dir of its own (the go command's work dir too, through
// GOTMPDIR) and is renamed onto the kept binary: ddpruns building the same
// package at once never see a half-written file, and a job whose workers
// restart after another job rebuilt the package starts the newer binary,
// as if it had been built from the sources as they are now. Scratch dirs of
// launchers that died mid-build are swept by sweepStale.
//
// Without a cache dir (no $HOME, or one that cannot be written) the binary
// goes to a per-run owned temp dir, removed at the end, or by sweepStale
// after a kill.
func (b builder) build(ctx context.Context, src string, isDir bool) (*program, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProgram, src, err)
	}
	dir, target := abs, "."
	if !isDir {
		dir, target = filepath.Dir(abs), filepath.Base(abs)
	}
	base := strings.TrimSuffix(filepath.Base(abs), ".go")

	var scratch *ownedDir
	keep := ""
	if kept, err := b.keptDir(abs, base); err == nil {
		keep = filepath.Join(kept, base)
		scratch, err = makeOwnedDir(kept, scratchPrefix)
		if err != nil {
			keep = ""
		}
	} else {
		b.log("no build cache (%v): building into a temp dir", err)
	}
	if keep == "" {
		if scratch, err = makeOwnedDir("", "ddprun-build-"); err != nil {
			return nil, fmt.Errorf("%w: temp dir for the build: %w", ErrProgram, err)
		}
	}
	out := filepath.Join(scratch.path, base)
	if keep != "" {
		// The kept binary, linked in as the output: when it is up to date
		// (its build ID matches), go build leaves it be instead of linking
		// again (1 s instead of 10 for examples/linear). A new build
		// replaces the name (go unlinks before it writes), never the kept file.
		_ = os.Link(keep, out)
	}
	args := append([]string{"build", "-o", out}, b.flags...)
	args = append(args, target)
	b.log("building %s (go %s)", src, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTMPDIR="+scratch.path)
	// The go command runs the compiler and linker as its children, in its
	// process group: stop them all.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	err = b.start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		scratch.remove()
		if keep != "" {
			_ = os.Remove(filepath.Dir(keep)) // only if no earlier build is kept there
		}
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s is a Go package but the go command is not on $PATH", ErrProgram, src)
		}
		return nil, fmt.Errorf("%w: %s does not build (%v):\n%s", ErrProgram, src, err, strings.TrimRight(msg.String(), "\n"))
	}
	if keep == "" {
		return &program{path: out, tempDir: scratch}, nil
	}
	err = os.Rename(out, keep)
	scratch.remove()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: keep the build: %w", ErrProgram, src, err)
	}
	return &program{path: keep}, nil
}

// scratchPrefix starts the owned scratch dirs of builds in a kept dir.
const scratchPrefix = ".build-"

// keptDir is the dir, made if need be, whose binary is the build of the
// package at abs with b.flags: <cache>/<base>-<hash of the path and flags>.
func (b builder) keptDir(abs, base string) (string, error) {
	root := b.cache
	if root == "" {
		var err error
		if root, err = buildCacheRoot(); err != nil {
			return "", err
		}
	}
	h := sha256.New()
	h.Write([]byte(abs))
	for _, f := range b.flags {
		h.Write([]byte{0})
		h.Write([]byte(f))
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%x", base, h.Sum(nil)[:8]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// sweepBuildScratch removes the scratch dirs that builds of dead launchers
// left in every kept dir under the cache root.
func sweepBuildScratch(cache string) []string {
	if cache == "" {
		var err error
		if cache, err = buildCacheRoot(); err != nil {
			return nil
		}
	}
	ents, err := os.ReadDir(cache)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		if e.IsDir() {
			removed = append(removed, sweepOwnedDirs(filepath.Join(cache, e.Name()), scratchPrefix, false)...)
		}
	}
	return removed
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
