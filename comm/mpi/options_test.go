package mpi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goddp/goddp/comm/mpi"
)

func TestUnderLauncher(t *testing.T) {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"} {
		t.Run(k, func(t *testing.T) {
			if mpi.UnderLauncher() {
				t.Skip("running under an MPI launcher")
			}
			t.Setenv(k, "2")
			assert.True(t, mpi.UnderLauncher())
		})
	}
}
