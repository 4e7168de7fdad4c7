package shm

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/envcfg"
	"github.com/goddp/goddp/internal/threadenv"
)

// Config tunes the shm backend. The zero value picks every default; New
// reads it from the environment (ConfigFromEnv), NewWithConfig takes it
// from the caller. The segment's layout (the first six fields) is chosen
// by rank 0 and published to the others, so only rank 0's values count;
// the waiting policy (Spin, Yield, Async) is each rank's own. Sizes in
// the environment accept K, M and G suffixes ("64K", "1M").
type Config struct {
	// SlotBytes is one slot of a rank's ring, and the chunk of the
	// copy-through collectives; rounded up to 4 KiB, at least 64 KiB.
	// GODDP_SHM_SLOT_BYTES, default 1 MiB.
	SlotBytes int
	// NBuf is the number of slots per rank, the steps in flight; at least
	// 2. GODDP_SHM_NBUF, default 4.
	NBuf int
	// SmallMax: all-reduces up to this size take one step in which every
	// rank reduces everything (at most SlotBytes). GODDP_SHM_SMALL_MAX,
	// default 8 KiB.
	SmallMax int
	// ChunkBytes is the all-reduce chunk above SmallMax (at least 4 KiB, at
	// most SlotBytes). GODDP_SHM_CHUNK_BYTES, default 256 KiB.
	ChunkBytes int
	// CMAMin is the all-reduce size from which the single-copy
	// (process_vm_readv) path runs; zero leaves it off, the default.
	// GODDP_SHM_CMA_MIN.
	CMAMin int
	// P2PRing is the byte ring per ordered pair of ranks that Send and
	// Recv stream through (at least 4 KiB). GODDP_SHM_P2P_RING, default
	// 128 KiB.
	P2PRing int
	// Spin is how long a wait spins before yielding while a goroutine
	// waits on the group: zero picks 2 ms when every local rank can have a
	// core and 10 µs otherwise; negative never spins. GODDP_SHM_SPIN (a Go
	// duration; 0s never spins).
	Spin time.Duration
	// Yield is how long a wait then yields (sched_yield) before it
	// sleeps: zero picks 100 ms; negative sleeps at once. GODDP_SHM_YIELD
	// (a Go duration; 0s sleeps at once).
	Yield time.Duration
	// Async is "eager" (large ops start on the group's worker as soon as
	// they are issued), "lazy" (they wait for a Wait or the watchdog) or
	// "" to pick eager when the node has a core to spare (ranks x threads
	// per rank < cores). GODDP_SHM_ASYNC.
	Async string
}

// The defaults, in one place.
const (
	DefaultSlotBytes  = 1 << 20
	DefaultNBuf       = 4
	DefaultSmallMax   = 8 << 10
	DefaultChunkBytes = 256 << 10
	// DefaultCMAMin leaves the single-copy path off. Whether it pays
	// depends on how often a peer is descheduled mid-op (ranks against
	// cores, other load) and on the cost of process_vm_readv on the
	// kernel; with one core per rank the copy through the slots was twice
	// as fast at 16-64 MiB, in 4 of 4
	// interleaved runs (16 MiB 1.4-2.0 ms against 3.2-4.0; 64 MiB 7.2-8.9
	// against 15.4-17.1), so CMA, which only pays off where a peer is often
	// descheduled mid-op (see cma.go), is opt-in.
	DefaultCMAMin  = 0
	DefaultP2PRing = 128 << 10
)

// ConfigFromEnv reads the GODDP_SHM_* variables; one that does not parse
// is an error wrapping backend.ErrBadArgument that names it.
func ConfigFromEnv() (Config, error) { return configFrom(os.LookupEnv) }

func configFrom(lookup envcfg.Lookup) (Config, error) {
	var c Config
	r := envcfg.Reader{Lookup: lookup}
	r.Bytes("GODDP_SHM_SLOT_BYTES", &c.SlotBytes)
	r.Int("GODDP_SHM_NBUF", &c.NBuf)
	r.Bytes("GODDP_SHM_SMALL_MAX", &c.SmallMax)
	r.Bytes("GODDP_SHM_CHUNK_BYTES", &c.ChunkBytes)
	r.Bytes("GODDP_SHM_CMA_MIN", &c.CMAMin)
	r.Bytes("GODDP_SHM_P2P_RING", &c.P2PRing)
	r.Duration("GODDP_SHM_SPIN", &c.Spin)
	r.Duration("GODDP_SHM_YIELD", &c.Yield)
	r.String("GODDP_SHM_ASYNC", &c.Async, "eager", "lazy")
	if r.Err != nil {
		return c, fmt.Errorf("shm: %w", r.Err)
	}
	return c, c.Validate()
}

// Validate reports the first field out of range, naming it and its
// environment variable.
func (c Config) Validate() error {
	const gib = 1 << 30
	for _, f := range []struct {
		name, env string
		v, lo, hi int
	}{
		{"SlotBytes", "GODDP_SHM_SLOT_BYTES", c.SlotBytes, 64 << 10, gib},
		{"NBuf", "GODDP_SHM_NBUF", c.NBuf, 2, 64},
		{"SmallMax", "GODDP_SHM_SMALL_MAX", c.SmallMax, 0, gib},
		{"ChunkBytes", "GODDP_SHM_CHUNK_BYTES", c.ChunkBytes, 4096, gib},
		{"CMAMin", "GODDP_SHM_CMA_MIN", c.CMAMin, 0, gib},
		{"P2PRing", "GODDP_SHM_P2P_RING", c.P2PRing, 4096, gib},
	} {
		if f.v < 0 || (f.v != 0 && f.v < f.lo) || f.v > f.hi {
			return fmt.Errorf("%w: shm: %s (%s) = %d: want 0 (the default) or %d to %d",
				backend.ErrBadArgument, f.name, f.env, f.v, max(f.lo, 1), f.hi)
		}
	}
	switch c.Async {
	case "", "eager", "lazy":
	default:
		return fmt.Errorf("%w: shm: Async (GODDP_SHM_ASYNC) = %q: want eager, lazy or empty", backend.ErrBadArgument, c.Async)
	}
	return nil
}

// resolve fills in the defaults for a group of world ranks: the one place
// they are applied.
func (c Config) resolve(world int) Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.SlotBytes, DefaultSlotBytes)
	def(&c.NBuf, DefaultNBuf)
	def(&c.SmallMax, DefaultSmallMax)
	def(&c.ChunkBytes, DefaultChunkBytes)
	def(&c.P2PRing, DefaultP2PRing)
	c.P2PRing = shmAlign(c.P2PRing, 4096)
	c.SlotBytes = shmAlign(c.SlotBytes, 4096)
	c.ChunkBytes = shmAlign(min(c.ChunkBytes, c.SlotBytes), 64)
	c.SmallMax = min(c.SmallMax, c.SlotBytes)
	switch {
	case c.Spin < 0:
		c.Spin = 0
	case c.Spin == 0:
		c.Spin = shmSpinBudget(world)
	}
	switch {
	case c.Yield < 0:
		c.Yield = 0
	case c.Yield == 0:
		c.Yield = shmYieldFor
	}
	if c.Async == "" {
		c.Async = "lazy"
		if world*max(1, threadenv.FromEnv()) < runtime.NumCPU() {
			c.Async = "eager"
		}
	}
	return c
}

// params is the segment layout rank 0 publishes.
func (c Config) params() shmParams {
	return shmParams{slotBytes: c.SlotBytes, nbuf: c.NBuf, smallMax: c.SmallMax,
		chunkBytes: c.ChunkBytes, cmaMin: c.CMAMin, ringBytes: c.P2PRing}
}
