package threadenv_test

import (
	"fmt"

	"goddp/internal/threadenv"
)

// A launcher checks a worker's environment: GODDP_NUM_THREADS holds no
// count, so OMP_NUM_THREADS decides.
func Example() {
	env := []string{"OMP_NUM_THREADS=1", "GODDP_NUM_THREADS=bogus"}
	fmt.Println(threadenv.FromList(env))
	// Output: 1
}
