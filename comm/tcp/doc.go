// Package tcp is goddp's "tcp" comm backend: collectives over a full mesh
// of TCP connections, for ranks on any number of hosts. comm imports it,
// so comm.Init finds it by name; New creates a group directly from
// backend.Options.
//
// # How it works
//
// Ranks connect in a full mesh, each connection with a reader and a writer
// goroutine, so links run both ways at once. Small buffers take
// latency-optimal paths (recursive doubling, binomial trees); large ones
// are pipelined in pieces over a ring (reduce-scatter then all-gather) or a
// chain, and receives land straight in their destination. Two ranks
// all-reduce up to 64 MiB in one pipelined exchange, run by a single-thread
// loop of non-blocking writes and reads (it needs a scratch buffer as large
// as the message; the ring needs half). A caller that waits on
// an op right away runs it on its own goroutine and reads small replies
// itself, so a small collective costs one wakeup.
//
// # Mismatched collectives
//
// Every rank must issue the same collectives in the same order. The first
// data frame of each collective to each peer carries the sender's
// descriptor (kind, dtype, reduce op, count, root: 16 bytes), checked by
// the receiver before the data; a collective that waits a second asks the
// other ranks what they run, for those that exchange no data. Ranks that
// disagree fail at once, all of them (the finder's abort frame tells the
// rest), with ErrBadArgument naming both collectives:
//
//	collective #12 mismatch: rank 0 issued allreduce(sum, float32, 4096 B), rank 1 issued broadcast(root 0, float32, 4096 B)
//
// GODDP_DEBUG_COLLECTIVES=1 adds an exchange of descriptors among all ranks
// before each collective.
//
// # Settings
//
// Config holds the tuning, with a field per variable; New reads it from the
// environment when a group is created (ConfigFromEnv) and fails, naming
// the variable, on a value that does not parse. Sizes take K, M and G
// suffixes.
//
//	GODDP_TCP_SMALL_BYTES     64K   latency-bound paths up to this size
//	GODDP_TCP_EXCHANGE_BYTES  64M   two-rank exchange up to this size
//	GODDP_TCP_PIECE_BYTES     1M    largest pipelined piece
//	GODDP_TCP_WRITE_BATCH     256K  bytes per writev beyond its first frame
//	GODDP_TCP_BUFFER          4M    socket send and receive buffers
//	GODDP_TCP_CONGESTION      auto  auto (reno for peers on this host), system, or a name for all
//	GODDP_TCP_SPIN_US         auto  µs a small collective polls for its reply (200 with a core per local rank, else 0; 0 disables)
package tcp
