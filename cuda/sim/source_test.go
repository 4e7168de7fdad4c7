package sim

import (
	"crypto/sha256"
	"fmt"
	"os"
	"testing"
)

// The compiled kernels are kernels.cu as it is now: kernels_gen.cc holds a
// copy of it, which go generate ./cuda/sim refreshes after every edit.
func TestGeneratedFromCurrentSource(t *testing.T) {
	src, err := os.ReadFile("../kernels/kernels.cu")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(src)); got != sourceSHA256 {
		t.Fatalf("kernels.cu changed since kernels_gen.* were generated (sha256 %s, generated from %s): run go generate ./cuda/sim", got, sourceSHA256)
	}
}
