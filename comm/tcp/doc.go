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
// Tuning knobs (environment, read when a group is created):
// GODDP_TCP_SMALL_BYTES (64 KiB: latency-bound paths up to this size),
// GODDP_TCP_EXCHANGE_BYTES (64 MiB: two-rank exchange up to this size),
// GODDP_TCP_PIECE_BYTES (1 MiB: largest pipelined piece),
// GODDP_TCP_WRITE_BATCH (256 KiB: bytes per writev beyond its first frame),
// GODDP_TCP_BUFFER (4 MiB socket buffers), GODDP_TCP_CONGESTION (auto:
// reno for peers on this host, whose connections bbr would pace; system:
// leave every connection alone; or a name for all) and GODDP_TCP_SPIN_US
// (microseconds a small collective polls for its reply before sleeping:
// 200 when the host has a core per local rank, else 0).
package tcp
