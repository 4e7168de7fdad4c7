// Package libfind lists where goddp looks for the NVIDIA libraries it opens
// at run time with dlopen (cuBLAS, NCCL): the path in an environment
// variable, then each soname on the system loader's path, then in the
// nvidia/*/lib directories of any Python environment on the machine, where
// pip wheels (nvidia-cublas-cu12, nvidia-cublas, nvidia-nccl-cu13, ...)
// put them.
//
// It only computes paths: it runs no Python (a library must not start
// processes to find a file) and loads nothing. The Python environments are
// found from the file system: $VIRTUAL_ENV, $CONDA_PREFIX, $PYTHONPATH,
// each python3 on $PATH (its prefix's lib/python3*/site-packages and
// dist-packages), /usr/local/lib/python3*, /usr/lib/python3*, and the
// user's ~/.local/lib/python3*.
package libfind

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Env is what the search reads: Getenv nil means os.Getenv (HOME unset
// means os.UserHomeDir). Tests pass their own.
type Env struct {
	Getenv func(string) string
	// Root prefixes every absolute path searched (tests use a temp dir).
	Root string
}

func (e Env) getenv(k string) string {
	if e.Getenv != nil {
		return e.Getenv(k)
	}
	return os.Getenv(k)
}

func (e Env) home() string {
	if h := e.getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// Candidates returns, in order, what to pass to dlopen for a library
// known by sonames (newest first, e.g. libcublas.so.13, .12, .11): the
// value of envVar when set (and only it: an explicit choice is not
// second-guessed), else each soname bare (the system loader's search:
// LD_LIBRARY_PATH, the ldconfig cache) followed by the copies of that
// soname in Python environments. Paths that do not exist are left out,
// bare sonames are always in.
func Candidates(envVar string, sonames []string, env Env) []string {
	if envVar != "" {
		if p := env.getenv(envVar); p != "" {
			return []string{p}
		}
	}
	dirs := PythonLibDirs(env)
	var out []string
	for _, so := range sonames {
		out = append(out, so)
		for _, d := range dirs {
			p := filepath.Join(d, so)
			if _, err := os.Stat(env.Root + p); err == nil {
				out = append(out, env.Root+p)
			}
		}
	}
	return out
}

// PythonLibDirs returns the existing nvidia/*/lib directories of the
// Python environments found on this machine, without duplicates, in
// search order (active environment first).
func PythonLibDirs(env Env) []string {
	var sites []string
	add := func(globs ...string) {
		for _, g := range globs {
			m, _ := filepath.Glob(env.Root + g)
			slices.Sort(m)
			slices.Reverse(m) // newest python3.N first
			for _, p := range m {
				sites = append(sites, strings.TrimPrefix(p, env.Root))
			}
		}
	}
	prefix := func(p string) {
		if p == "" {
			return
		}
		add(p+"/lib/python3*/site-packages", p+"/lib/python3*/dist-packages", p+"/lib/python3/dist-packages")
	}
	prefix(env.getenv("VIRTUAL_ENV"))
	prefix(env.getenv("CONDA_PREFIX"))
	for _, p := range filepath.SplitList(env.getenv("PYTHONPATH")) {
		if p != "" {
			add(p)
		}
	}
	for _, dir := range filepath.SplitList(env.getenv("PATH")) {
		if dir == "" {
			continue
		}
		py := filepath.Join(dir, "python3")
		real, err := filepath.EvalSymlinks(env.Root + py)
		if err != nil {
			continue
		}
		// bin/python3 -> the prefix above bin; both the link's and its
		// target's prefixes (a venv's python3 links to the system one).
		prefix(filepath.Dir(dir))
		prefix(filepath.Dir(filepath.Dir(strings.TrimPrefix(real, env.Root))))
	}
	prefix("/usr/local")
	prefix("/usr")
	prefix("/opt/conda")
	if h := env.home(); h != "" {
		prefix(h + "/.local")
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range sites {
		libs, _ := filepath.Glob(env.Root + filepath.Join(s, "nvidia", "*", "lib"))
		slices.Sort(libs)
		for _, l := range libs {
			l = strings.TrimPrefix(l, env.Root)
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	return out
}

// CUBLASSonames are the cuBLAS sonames goddp/cuda tries, newest first,
// dropping those newer than the driver supports: driverVersion is
// cuDriverGetVersion's value (12040 for CUDA 12.4), 0 when unknown. A
// cuBLAS for CUDA 13 loads on an older driver but fails at its first call,
// so it is not offered.
func CUBLASSonames(driverVersion int) []string {
	var out []string
	for _, major := range []int{13, 12, 11} {
		if driverVersion == 0 || major*1000 <= driverVersion {
			out = append(out, "libcublas.so."+strconv.Itoa(major))
		}
	}
	return out
}

// CUDNNSonames are the cuDNN sonames goddp/cuda tries, newest first. Both
// keep the legacy convolution API (cudnnConvolutionForward and its
// algorithm queries) that goddp calls.
func CUDNNSonames() []string { return []string{"libcudnn.so.9", "libcudnn.so.8"} }

// CandidatesSystemFirst is Candidates with every bare soname (the system
// loader's search) before any Python environment's copy: a cuDNN
// installed with the system, which its CUDA toolkit was built against, is
// preferred to a wheel's of a newer major version. The environment
// variable, when set, is still the only candidate.
func CandidatesSystemFirst(envVar string, sonames []string, env Env) []string {
	if envVar != "" {
		if p := env.getenv(envVar); p != "" {
			return []string{p}
		}
	}
	out := slices.Clone(sonames)
	for _, c := range Candidates("", sonames, env) {
		if !slices.Contains(sonames, c) {
			out = append(out, c)
		}
	}
	return out
}
