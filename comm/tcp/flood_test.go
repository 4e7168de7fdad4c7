package tcp

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
)

// TestTCPMeshHandshakeFlood floods rank 0's peer listener, while it waits
// for rank 1, with 300 connections that start a handshake and go silent:
// rank 0 holds at most peerHandshakes+size of them (the oldest beyond that
// are closed at once, not after the 10 s handshake timeout), its goroutines
// stay bounded, and the real rank 1 still joins. Before issue 17 every
// silent connection held a socket and a goroutine until the handshake
// timed out or the mesh was complete.
func TestTCPMeshHandshakeFlood(t *testing.T) {
	const flood = 300
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, join, log := meshRank0(t, ctx)
	before := runtime.NumGoroutine()
	conns := make([]net.Conn, flood)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		c.Write([]byte("GDDP"))
		conns[i] = c
	}
	held := flood
	deadline := time.Now().Add(3 * time.Second)
	for held > peerHandshakes+2 && time.Now().Before(deadline) {
		held = 0
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				held++
			}
		}
	}
	t.Logf("rank 0 holds %d of %d silent connections; goroutines %d -> %d", held, flood, before, runtime.NumGoroutine())
	assert.LessOrEqual(t, held, peerHandshakes+2, "rank 0 holds every silent connection")
	assert.Less(t, runtime.NumGoroutine()-before, peerHandshakes+2+16)
	assert.Contains(t, log.text(), "connections in the handshake at once")

	g0, g1 := join()
	w := g0.AllReduce(backend.Float32s([]float32{1}), backend.Sum)
	require.NoError(t, g1.AllReduce(backend.Float32s([]float32{2}), backend.Sum).Wait(ctx))
	require.NoError(t, w.Wait(ctx))
}
