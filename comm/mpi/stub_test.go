//go:build !mpi

package mpi_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/mpi"
)

// Without the mpi tag, both entry points say how to get MPI.
func TestNotCompiled(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func() error
	}{
		{"New", func() error {
			_, err := mpi.New(ctx, mpi.Options{AllowSingleton: true})
			return err
		}},
		{"comm.Init", func() error {
			_, err := comm.Init(ctx, comm.Config{Backend: "mpi", WorldSize: 1,
				InitMethod: "file://" + filepath.Join(t.TempDir(), "store")})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			require.ErrorIs(t, err, mpi.ErrNotCompiled)
			assert.Contains(t, err.Error(), "-tags mpi")
		})
	}
}
