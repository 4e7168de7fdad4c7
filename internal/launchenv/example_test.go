package launchenv_test

import (
	"fmt"

	"github.com/goddp/goddp/internal/launchenv"
)

// Under mpirun, RANK and WORLD_SIZE are unset and OpenMPI's variables decide.
func Example() {
	env := map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
		"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
	e, err := launchenv.Parse(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(e.Rank, e.WorldSize, e.LocalRank, e.LocalWorldSize, e.Launcher, err)
	// Output: 2 4 0 2 OpenMPI <nil>
}
