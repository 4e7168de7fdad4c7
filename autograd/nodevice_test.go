package autograd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deviceQuery matches code that asks where a tensor lives: IsCPU, a
// comparison of devices, or a reach for a device's kernel table.
var deviceQuery = regexp.MustCompile(`\bIsCPU\(|\.Device\(\)\s*[!=]=|[!=]=\s*[\w.]+\.Device\(\)|\bKernelsOf\(|\.Kernels\(\)`)

// deviceBranches returns "file:line: code" for each line of the package's
// non-test Go files in dir that asks where a tensor lives, except lines in
// allowed (file name → the exact trimmed line).
func deviceBranches(t *testing.T, dir string, allowed map[string]string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			code = strings.TrimSpace(code)
			if !deviceQuery.MatchString(code) || allowed[filepath.Base(f)] == code {
				continue
			}
			found = append(found, filepath.Base(f)+":"+itoa(i+1)+": "+code)
		}
	}
	return found
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// TestNoDeviceBranches: ops are written once; the tensor ops they call
// dispatch on their operands' device (issue 25), so no non-test file here
// asks where a tensor lives.
func TestNoDeviceBranches(t *testing.T) {
	for _, b := range deviceBranches(t, ".", nil) {
		t.Errorf("device branch outside package tensor: %s", b)
	}
}

// TestDeviceBranchScanFinds: the scan is not blind to the forms it bans.
func TestDeviceBranchScanFinds(t *testing.T) {
	for _, code := range []string{
		"if !a.Value.IsCPU() {",
		"if tensor.IsCPU(dev) {",
		"if c.Device() != like.Device() {",
		"if dev == x.Device() {",
		"k := tensor.KernelsOf(\"optim\", ts...)",
		"k := t.Device().Kernels()",
	} {
		if !deviceQuery.MatchString(code) {
			t.Errorf("deviceQuery misses %q", code)
		}
	}
	for _, code := range []string{"tensor.OnCPU(op, v.Value)", "y := tensor.MustZerosOn(x.Device(), 3)"} {
		if deviceQuery.MatchString(code) {
			t.Errorf("deviceQuery flags %q, which does not branch", code)
		}
	}
}
