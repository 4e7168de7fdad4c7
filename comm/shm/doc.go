// Package shm is goddp's "shm" comm backend: collectives through a shared
// memory segment, for ranks on one host (comm.Init's "auto" picks it there).
// comm imports it, so comm.Init finds it by name; New creates a group
// directly from backend.Options.
//
// # Waiting
//
// A rank waiting for a peer spins, then yields (sched_yield), then sleeps.
// How long it spins depends on who waits: while a goroutine is blocked in
// Wait on the group, the process has nothing better to do and spins up to
// 2 ms (GODDP_SHM_SPIN) for the fastest answer; while nobody waits (an
// async op running beside compute, as DDP's bucket all-reduces run beside
// backward) it spins only 10 us, so that it does not take the core from
// that compute. GODDP_SHM_YIELD (100 ms) bounds the yielding phase.
//
// # When shm ops run
//
// With a core to spare on the node (ranks x threads per rank < cores), a
// large shm op starts on the group's worker goroutine as soon as it is
// issued, so that it overlaps the caller's compute. Without one (2 ranks
// of 1 thread on 2 cores) ops wait for a Wait, which runs them inline (the
// watchdog starts any op nobody waits for within a few milliseconds), and
// the watchdog ticks less often. DDP's watcher goroutines wait at once, so
// its bucket all-reduces still start during backward. GODDP_SHM_ASYNC=
// eager|lazy overrides the choice.
//
// # Files in /dev/shm
//
// Rank 0 creates the segment, and a file per AllocShared (DDP's shared
// buckets), as goddp-shm-<pid>-<start>-<random>[-arena], and every rank
// unlinks the name once all have mapped it. A job killed before that
// leaves the file; every new group removes the files whose creator has
// died (it holds a lock on the file while the name exists, so a live job's
// file is never taken, whatever pid namespace it runs in), and SweepDead
// does the same for a launcher whose worker died. FreeShared gives a
// region's pages back at once, so DDP wrapped and closed again and again
// holds one set of buckets, not all of them.
//
// # Settings
//
// Config holds the tuning, with a field per variable; New reads it from the
// environment when a group is created (ConfigFromEnv) and fails, naming
// the variable, on a value that does not parse. Sizes take K, M and G
// suffixes. The segment layout is rank 0's, published to the others.
//
//	GODDP_SHM_SLOT_BYTES   1M     slot size (at least 64K)
//	GODDP_SHM_NBUF         4      slots per rank (2 to 64)
//	GODDP_SHM_SMALL_MAX    8K     one-step all-reduce up to this size
//	GODDP_SHM_CHUNK_BYTES  256K   all-reduce chunk above that
//	GODDP_SHM_CMA_MIN      0      single-copy all-reduce from this size (0: off)
//	GODDP_SHM_P2P_RING     128K   Send/Recv ring per ordered pair of ranks
//	GODDP_SHM_SPIN         auto   spin before yielding (2ms, or 10us when ranks outnumber cores; 0s: none)
//	GODDP_SHM_YIELD        100ms  yield before sleeping (0s: sleep at once)
//	GODDP_SHM_ASYNC        auto   eager or lazy (see above)
package shm
