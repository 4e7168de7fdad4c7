package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/goddp/goddp/comm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Spawned bodies; TestMain hands them to RunChild.

func spawnOK(_ context.Context, rank, world int) error {
	fmt.Printf("WORKER {\"event\":\"spawn\",\"rank\":%d,\"world\":%d,\"pid\":%d,\"port\":%q,\"hosted\":%q}\n",
		rank, world, os.Getpid(), os.Getenv(EnvMasterPort), os.Getenv(EnvStoreHosted))
	return nil
}

func spawnFail(ctx context.Context, rank, _ int) error {
	if rank == 1 {
		return errors.New("rank 1 gives up: checksum mismatch")
	}
	<-ctx.Done() // stopped by the parent's SIGTERM
	return ctx.Err()
}

func spawnPanic(_ context.Context, rank, _ int) error {
	if rank == 0 {
		var m map[string]int
		m["x"] = 1
	}
	time.Sleep(time.Minute)
	return nil
}

func TestSpawn(t *testing.T) {
	out := &syncBuffer{}
	err := Spawn(context.Background(), spawnOK, 3, WithSpawnOutput(out, out, out))
	require.NoError(t, err, out.String())
	got := map[int]bool{}
	for _, r := range reports(out.String(), "spawn") {
		rank := int(r["rank"].(float64))
		got[rank] = true
		assert.Equal(t, 3.0, r["world"])
		assert.Equal(t, "1", r.str("hosted"))
		_, perr := strconv.Atoi(r.str("port"))
		assert.NoError(t, perr)
	}
	assert.Equal(t, map[int]bool{0: true, 1: true, 2: true}, got)
}

func TestSpawnFailure(t *testing.T) {
	tests := []struct {
		name string
		fn   SpawnFunc
		rank int
		msg  string
	}{
		{"error", spawnFail, 1, "rank 1 gives up: checksum mismatch"},
		{"panic", spawnPanic, 0, "assignment to entry in nil map"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := &syncBuffer{}
			start := time.Now()
			err := Spawn(context.Background(), tc.fn, 2, WithSpawnOutput(out, out, out), WithSpawnStopGrace(time.Second))
			require.ErrorIs(t, err, ErrWorkerFailed)
			assert.Less(t, time.Since(start), 20*time.Second)
			var fe *FailureError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.rank, fe.Root.Rank)
			require.NotNil(t, fe.Root.Record, out.String())
			assert.Contains(t, fe.Root.Record.Message, tc.msg)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestSpawnInsideChildRefuses(t *testing.T) {
	t.Setenv(envSpawnFunc, "x")
	err := Spawn(context.Background(), spawnOK, 1)
	require.ErrorIs(t, err, ErrUsage)
	assert.Contains(t, err.Error(), "RunChild")
}

// spawnStore uses the store Spawn hosts (GODDP_STORE_HOSTED=1): every rank
// writes its key, then reads every other rank's, authenticated with the
// generated job token.
func spawnStore(ctx context.Context, rank, world int) error {
	addr := net.JoinHostPort(os.Getenv(EnvMasterAddr), os.Getenv(EnvMasterPort))
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := comm.DialStore(ctx, addr, comm.WithToken(os.Getenv(EnvToken)))
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Set(ctx, fmt.Sprintf("rank/%d", rank), []byte(strconv.Itoa(rank*10))); err != nil {
		return err
	}
	for r := 0; r < world; r++ {
		v, err := st.Get(ctx, fmt.Sprintf("rank/%d", r))
		if err != nil {
			return err
		}
		if string(v) != strconv.Itoa(r*10) {
			return fmt.Errorf("rank %d read %q for rank %d", rank, v, r)
		}
	}
	fmt.Printf("WORKER {\"event\":\"store-ok\",\"pid\":%d}\n", os.Getpid())
	return nil
}

func TestSpawnHostedStore(t *testing.T) {
	out := &syncBuffer{}
	err := Spawn(context.Background(), spawnStore, 3, WithSpawnOutput(out, out, out))
	require.NoError(t, err, out.String())
	assert.Len(t, reports(out.String(), "store-ok"), 3)
}

// spawnAllReduce is what Spawn is for: ranks that join a process group.
func spawnAllReduce(ctx context.Context, rank, world int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	buf := []float64{float64(rank + 1)}
	if err := pg.AllReduce(comm.Float64s(buf), comm.Sum).Wait(ctx); err != nil {
		return err
	}
	if want := float64(world*(world+1)) / 2; buf[0] != want {
		return fmt.Errorf("rank %d: sum %v, want %v", rank, buf[0], want)
	}
	fmt.Printf("WORKER {\"event\":\"allreduce-ok\",\"pid\":%d}\n", os.Getpid())
	return nil
}

func TestSpawnAllReduce(t *testing.T) {
	out := &syncBuffer{}
	require.NoError(t, Spawn(context.Background(), spawnAllReduce, 3, WithSpawnOutput(out, out, out)), out.String())
	assert.Len(t, reports(out.String(), "allreduce-ok"), 3)
}
