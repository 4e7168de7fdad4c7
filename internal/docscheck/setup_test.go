package docscheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the module's root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// fakeTools writes stand-ins for dpkg-query (every package missing),
// apt-get (each call appended to log) and go (does nothing) into a
// directory for the front of PATH, so a setup script runs its real logic
// without root, network or package changes.
func fakeTools(t *testing.T) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(dir, "apt.log")
	scripts := map[string]string{
		"dpkg-query": "#!/bin/sh\nexit 1\n",
		"apt-get":    "#!/bin/sh\necho \"$*\" >> '" + log + "'\n",
		"go":         "#!/bin/sh\nexit 0\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, log
}

// runSetup runs scripts/NAME with the fake tools and returns its output and
// the packages passed to each `apt-get install`, one slice per call.
func runSetup(t *testing.T, name string) (string, [][]string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	fake, log := fakeTools(t)
	cmd := exec.Command("bash", filepath.Join("scripts", name))
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/%s with fake apt-get and dpkg-query: %v\n%s", name, err, out)
	}
	raw, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var installs [][]string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "install" {
			continue
		}
		var pkgs []string
		for _, w := range f[1:] {
			if !strings.HasPrefix(w, "-") {
				pkgs = append(pkgs, w)
			}
		}
		installs = append(installs, pkgs)
	}
	return string(out), installs
}

// testOnly matches the packages only the test suite uses: MPI, Slurm and
// munge, the browser, and the e2e tests' probes.
var testOnly = regexp.MustCompile(`openmpi|mpich|mpi-|slurm|munge|chromium|strace|iproute2`)

func TestTrainingSetupInstallsNoTestTool(t *testing.T) {
	out, installs := runSetup(t, "setup.sh")
	if len(installs) != 1 {
		t.Fatalf("scripts/setup.sh ran apt-get install %d times on a machine missing everything, want once: %v\n%s", len(installs), installs, out)
	}
	train := installs[0]
	for _, p := range train {
		if testOnly.MatchString(p) {
			t.Errorf("scripts/setup.sh (the training command's setup) installs %s, a test-only tool: it belongs in scripts/setup-test.sh", p)
		}
	}
	for _, want := range []string{"libopenblas-dev", "libdnnl-dev", "gcc", "pkg-config"} {
		if !contains(train, want) {
			t.Errorf("scripts/setup.sh does not install %s, which training builds with; it installs %v", want, train)
		}
	}
	// The setup says what it installs.
	if !strings.Contains(out, "setup: installing "+strings.Join(train, " ")) {
		t.Errorf("scripts/setup.sh did not print the packages it installs (%v); its output:\n%s", train, out)
	}

	// The test command's setup installs the training packages and then the
	// test tools, none of them twice.
	out, installs = runSetup(t, "setup-test.sh")
	if len(installs) != 2 {
		t.Fatalf("scripts/setup-test.sh ran apt-get install %d times, want twice (training, then tests): %v\n%s", len(installs), installs, out)
	}
	if strings.Join(installs[0], " ") != strings.Join(train, " ") {
		t.Errorf("scripts/setup-test.sh's first install is %v, want the training setup's %v", installs[0], train)
	}
	for _, p := range installs[1] {
		if contains(train, p) {
			t.Errorf("%s is in both scripts/setup.sh and scripts/setup-test.sh", p)
		}
	}
	for _, want := range []string{"openmpi-bin", "libopenmpi-dev", "slurmd", "slurmctld", "munge", "chromium", "strace", "iproute2"} {
		if !contains(installs[1], want) {
			t.Errorf("scripts/setup-test.sh does not install %s, which the test suite needs; it installs %v", want, installs[1])
		}
	}
}

// TestCommandsUseTheirSetup checks which setup each of the two commands runs.
func TestCommandsUseTheirSetup(t *testing.T) {
	for script, want := range map[string]string{"train.sh": "bash scripts/setup.sh\n", "test.sh": "bash scripts/setup-test.sh\n"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", script))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("scripts/%s does not run %q", script, strings.TrimSpace(want))
		}
		if script == "train.sh" && strings.Contains(string(b), "setup-test.sh") {
			t.Errorf("scripts/train.sh runs the test suite's setup")
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
