package threadenv_test

import (
	"fmt"

	"github.com/goddp/goddp/internal/threadenv"
)

// GODDP_NUM_THREADS holds no count, so OMP_NUM_THREADS decides.
func Example() {
	env := map[string]string{"OMP_NUM_THREADS": "1", "GODDP_NUM_THREADS": "bogus"}
	fmt.Println(threadenv.Parse(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	// Output: 1
}
