package kernels

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
)

// The machine code gen_ptx.go builds beside the PTX, where its NVRTC can:
// cubin/sm_XY.cubin.gz for each architecture, and cubin/SOURCE, the
// SHA-256 of the kernels.cu they were built from. The directory always
// holds its README, so a tree without cubins still builds (and JITs the
// PTX).
//
//go:embed cubin kernels.cu
var files embed.FS

// SourceHash is the SHA-256 of kernels.cu as this build embeds it: a cubin
// is used only when it was built from this source, so one left over from
// an older kernels.cu (a merge that regenerated ptx.go only) is never
// loaded in place of the PTX.
func SourceHash() string {
	src, err := files.ReadFile("kernels.cu")
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// Arches lists the architectures (80 for sm_80) this build has current
// cubins for, ascending. It is empty when gen_ptx.go's NVRTC could not
// build them, or when they are stale (built from another kernels.cu).
func Arches() []int {
	stamp, err := files.ReadFile("cubin/SOURCE")
	if err != nil || strings.TrimSpace(string(stamp)) != SourceHash() {
		return nil
	}
	names, _ := fs.Glob(files, "cubin/sm_*.cubin.gz")
	var out []int
	for _, n := range names { // Glob sorts; sm_80 < sm_90 as text and as numbers (two digits)
		a, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(n, "cubin/sm_"), ".cubin.gz"))
		if err == nil {
			out = append(out, a)
		}
	}
	return out
}

// Cubin returns the machine code of kernels.cu for a device of compute
// capability major.minor, and its architecture ("sm_80"), when this build
// has a current cubin that runs there: the same major version and a minor
// version at most the device's (NVIDIA's binary compatibility), the
// newest such. ok is false otherwise: load PTX, which the driver JIT
// compiles for any device.
func Cubin(major, minor int) (image []byte, arch string, ok bool, err error) {
	best := -1
	for _, a := range Arches() {
		if a/10 == major && a%10 <= minor {
			best = a
		}
	}
	if best < 0 {
		return nil, "", false, nil
	}
	arch = fmt.Sprintf("sm_%d", best)
	gz, err := files.ReadFile("cubin/" + arch + ".cubin.gz")
	if err != nil {
		return nil, "", false, fmt.Errorf("kernels: %s cubin: %w", arch, err)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, "", false, fmt.Errorf("kernels: %s cubin: %w", arch, err)
	}
	image, err = io.ReadAll(r)
	if err != nil {
		return nil, "", false, fmt.Errorf("kernels: %s cubin: %w", arch, err)
	}
	return image, arch, true, nil
}
