// Command kithang stands in for a device test binary in CI's dry run of
// the GPU kit (scripts/check-engines.sh): asked to run the test named by
// KITHANG_TEST, it hangs as a deadlocked GPU test would; asked for any
// other, it fails at once. The dry run checks that run.sh kills the hung
// step at its bound, that the step's log holds the Go stacks, and that
// the later steps still run.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	run := flag.String("test.run", "", "")
	flag.Bool("test.v", false, "")
	flag.Int("test.count", 1, "")
	flag.Duration("test.timeout", 0, "")
	flag.Parse()
	name := strings.Trim(*run, "^$")
	fmt.Printf("=== RUN   %s\n", name)
	if name == os.Getenv("KITHANG_TEST") {
		hang := make(chan struct{})
		go func() { time.Sleep(24 * time.Hour); close(hang) }()
		<-hang
	}
	fmt.Printf("--- FAIL: %s (0.00s)\n    kithang: a stand-in, not a device test\nFAIL\n", name)
	os.Exit(1)
}
