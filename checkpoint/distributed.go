package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// Status codes broadcast by rank 0 ahead of a payload. They travel as small
// integers in float32, exact whatever the backend does with floats.
const (
	statusOK       = 1
	statusFailed   = 2 // payload: rank 0's error text
	statusNotFound = 3 // payload: rank 0's error text
)

// chunkFloats bounds one Broadcast (16 MiB), so a large checkpoint moves in
// pieces that backends handle comfortably.
const chunkFloats = 4 << 20

// SaveOnRank0 saves c through m on rank 0 while the other ranks wait, as
// torch users do with `if rank == 0: torch.save(...)` followed by a barrier.
// Rank 0 then broadcasts the outcome, so every rank returns the same path, or
// an error (wrapping ErrRemote on the other ranks) if the save failed; all
// ranks finally meet at a barrier. c is only read on rank 0 and may be nil
// elsewhere. Each collective ends with ctx or the group's own timeout, so a
// dead peer cannot hang the caller.
func SaveOnRank0(ctx context.Context, pg backend.ProcessGroup, m *Manager, c *Checkpoint) (string, error) {
	var payload []byte
	status := statusOK
	var saveErr error
	if pg.Rank() == 0 {
		var path string
		if c == nil {
			saveErr = fmt.Errorf("checkpoint: SaveOnRank0: nil checkpoint on rank 0")
		} else {
			path, saveErr = m.Save(c)
		}
		if saveErr != nil {
			status, payload = statusFailed, []byte(saveErr.Error())
		} else {
			payload = []byte(path)
		}
	}
	st, got, err := broadcastBytes(ctx, pg, status, payload)
	if err != nil {
		return "", fmt.Errorf("checkpoint: save on rank 0: %w", err)
	}
	if err := wait(ctx, pg.Barrier()); err != nil {
		return "", fmt.Errorf("checkpoint: barrier after save: %w", err)
	}
	if pg.Rank() == 0 {
		if saveErr != nil {
			return "", saveErr
		}
		return string(got), nil
	}
	if st != statusOK {
		return "", fmt.Errorf("%w: %s", ErrRemote, got)
	}
	return string(got), nil
}

// LockOnRank0 takes m's directory lock on rank 0, the rank that saves (see
// Manager.Lock), and tells every rank the outcome, so that when another job
// holds the directory every rank fails at once, before training, instead of
// the other ranks waiting for a rank 0 that has already given up. The other
// ranks take no lock: their Managers only name files. They get an error
// wrapping ErrRemote that carries rank 0's (which wraps ErrLocked and names
// the directory and the holder's pid).
func LockOnRank0(ctx context.Context, pg backend.ProcessGroup, m *Manager) error {
	var payload []byte
	status := statusOK
	var lockErr error
	if pg.Rank() == 0 {
		if lockErr = m.Lock(); lockErr != nil {
			status, payload = statusFailed, []byte(lockErr.Error())
		}
	}
	st, got, err := broadcastBytes(ctx, pg, status, payload)
	if lockErr != nil {
		return lockErr
	}
	if err != nil {
		return fmt.Errorf("checkpoint: lock on rank 0: %w", err)
	}
	if st != statusOK {
		return fmt.Errorf("%w: %s", ErrRemote, got)
	}
	return nil
}

// LoadLatestAndBroadcast finds the newest valid checkpoint in m on rank 0
// (only rank 0 needs the directory) and sends the file to every rank, which
// each decode and verify it. With no valid checkpoint every rank gets an
// error wrapping ErrNotFound, so all ranks agree to start fresh.
func LoadLatestAndBroadcast(ctx context.Context, pg backend.ProcessGroup, m *Manager) (*Checkpoint, error) {
	return loadAndBroadcast(ctx, pg, func() ([]byte, string, error) { return m.latestBytes() })
}

// LoadAndBroadcast reads the checkpoint at path on rank 0 and sends it to
// every rank; see LoadLatestAndBroadcast. To load on every rank from a shared
// file system, call Load on each rank instead.
func LoadAndBroadcast(ctx context.Context, pg backend.ProcessGroup, path string) (*Checkpoint, error) {
	return loadAndBroadcast(ctx, pg, func() ([]byte, string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, path, fmt.Errorf("checkpoint: %w", err)
		}
		if _, err := Decode(b, path); err != nil {
			return nil, path, err
		}
		return b, path, nil
	})
}

func loadAndBroadcast(ctx context.Context, pg backend.ProcessGroup, read func() ([]byte, string, error)) (*Checkpoint, error) {
	var payload []byte
	status := statusOK
	name := "checkpoint from rank 0"
	var readErr error
	if pg.Rank() == 0 {
		var path string
		payload, path, readErr = read()
		switch {
		case errors.Is(readErr, ErrNotFound):
			status, payload = statusNotFound, []byte(readErr.Error())
		case readErr != nil:
			status, payload = statusFailed, []byte(readErr.Error())
		default:
			name = path
		}
	}
	st, got, err := broadcastBytes(ctx, pg, status, payload)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: broadcast from rank 0: %w", err)
	}
	if readErr != nil {
		return nil, readErr
	}
	switch st {
	case statusOK:
		return Decode(got, name)
	case statusNotFound:
		return nil, fmt.Errorf("%w (rank 0: %s)", ErrNotFound, got)
	default:
		return nil, fmt.Errorf("%w: %s", ErrRemote, got)
	}
}

// broadcastBytes sends (status, payload) from rank 0 to every rank: a 4-float
// header {status, len in three 21-bit parts}, then the payload as float32
// words in chunks. It returns what rank 0 sent.
func broadcastBytes(ctx context.Context, pg backend.ProcessGroup, status int, payload []byte) (int, []byte, error) {
	hdr := make([]float32, 4)
	if pg.Rank() == 0 {
		n := uint64(len(payload))
		hdr[0] = float32(status)
		hdr[1], hdr[2], hdr[3] = float32(n&(1<<21-1)), float32(n>>21&(1<<21-1)), float32(n>>42&(1<<21-1))
	}
	if err := wait(ctx, pg.Broadcast(backend.Float32s(hdr), 0)); err != nil {
		return 0, nil, err
	}
	st := int(hdr[0])
	n := uint64(hdr[1]) | uint64(hdr[2])<<21 | uint64(hdr[3])<<42
	if n > 1<<50 {
		return 0, nil, fmt.Errorf("checkpoint: implausible payload length %d from rank 0", n)
	}
	words := make([]float32, (n+3)/4)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), 4*len(words))
	if pg.Rank() == 0 {
		copy(buf, payload)
	}
	var works []backend.Work
	for start := 0; start < len(words); start += chunkFloats {
		end := min(start+chunkFloats, len(words))
		works = append(works, pg.Broadcast(backend.Float32s(words[start:end]), 0))
	}
	var firstErr error
	for _, w := range works { // wait for all, even after a failure, so no buffer is still in use
		if err := wait(ctx, w); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return 0, nil, firstErr
	}
	return st, buf[:n], nil
}

func wait(ctx context.Context, w backend.Work) error { return w.Wait(ctx) }
