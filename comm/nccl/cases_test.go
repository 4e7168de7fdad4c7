package nccl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/nccl"
)

// TestGPUCases runs commtest's conformance table, the one tcp, shm and mpi
// run, on a one-rank NCCL communicator. Ops NCCL lacks must fail with
// comm.ErrUnsupported; every other case must give the table's result. It
// skips where there is no GPU (it has not run yet).
func TestGPUCases(t *testing.T) {
	if _, err := nccl.Probe(); err != nil {
		t.Skipf("no NCCL/GPU here, so the conformance table cannot run: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pg, err := nccl.New(ctx, nccl.Options{Size: 1, Store: fileStore(t), Timeout: time.Minute})
	require.NoError(t, err)
	defer func() { assert.NoError(t, pg.Close()) }()
	for _, c := range commtest.Cases(pg.Size(), []int{0, 1, 7, 1000, 4099}, 100_003) {
		_, err := commtest.RunCase(ctx, pg, c)
		if errors.Is(err, comm.ErrUnsupported) {
			t.Logf("%v: unsupported: %v", c, err)
			continue
		}
		require.NoError(t, err, "%v", c)
	}
}
