package comm

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/mpi"
)

// comm registers every backend it ships: a program that imports only comm
// can ask for any of them by name.
func TestBackendsRegisteredWithoutBlankImport(t *testing.T) {
	assert.Subset(t, Backends(), []string{"hier", "mpi", "nccl", "shm", "tcp"})
}

// Asking Init for nccl or mpi reaches the backend (which explains what is
// missing here) instead of failing with "unknown backend".
func TestInitReachesEveryBackend(t *testing.T) {
	for _, name := range []string{"nccl", "mpi"} {
		t.Run(name, func(t *testing.T) {
			_, err := Init(context.Background(), Config{Backend: name, WorldSize: 1, Timeout: 20 * time.Second,
				InitMethod: "file://" + filepath.Join(t.TempDir(), "store")})
			if err == nil {
				t.Skipf("a real %s is available here", name)
			}
			assert.NotContains(t, err.Error(), "unknown backend")
			assert.Contains(t, err.Error(), `init backend "`+name+`"`)
			if name == "mpi" {
				require.True(t, errors.Is(err, mpi.ErrNotCompiled) || errors.Is(err, mpi.ErrNotUnderMPI), "%v", err)
			}
		})
	}
}
