package optim

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoDeviceBranches: the updates are tensor ops (tensor.SGDStep,
// AdamStep, ClipGradNorm) that dispatch on the parameter's device (issue
// 25), so no non-test file here asks where a tensor lives: IsCPU, a
// comparison of devices, or a device's kernel table.
func TestNoDeviceBranches(t *testing.T) {
	query := regexp.MustCompile(`\bIsCPU\(|\.Device\(\)\s*[!=]=|[!=]=\s*[\w.]+\.Device\(\)|\bKernelsOf\(|\.Kernels\(\)`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go files scanned")
	}
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
			if query.MatchString(code) {
				t.Errorf("device branch outside package tensor: %s:%d: %s", f, i+1, strings.TrimSpace(code))
			}
		}
	}
}
