package trainer

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts Go's CPU profiler into path (path.rank<r> in a
// world of more than one, so that ranks sharing a directory do not
// overwrite each other) and returns the function that stops it and closes
// the file.
func startCPUProfile(path string, rank, world int) (func(), error) {
	if world > 1 {
		path = fmt.Sprintf("%s.rank%d", path, rank)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: -cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("trainer: -cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
