// Package comm is goddp's communication layer: a rendezvous store, process
// groups and the collectives that data-parallel training needs, over five
// backends: TCP ("tcp"), shared memory ("shm"), the two combined across
// hosts ("hier"), MPI ("mpi") and NCCL ("nccl").
//
// # Layout
//
// comm is split as database/sql is, into a contract and drivers:
//
//   - goddp/comm/backend holds the contract: ProcessGroup and its optional
//     interfaces, Buffer, DType, ReduceOp, Work and Future, the sentinel
//     errors and OpError, the Store interface, Options and the registry.
//     comm re-exports every name with a type alias, so comm.ProcessGroup,
//     comm.Float32s and comm.Sum are the backend package's.
//   - goddp/comm/store is the rendezvous store (TCP server and client, file
//     and prefix stores, their wire format). Launchers import it alone.
//   - goddp/comm/tcp, shm, hier, mpi and nccl are the backends. Each
//     imports backend (and store, internal/...), never comm and never
//     another backend, and registers itself in init; hier composes two
//     others that it opens by name from the registry (shm within a host,
//     tcp across hosts by default). comm imports all five (drivers.go), so
//     comm.Init finds every backend with no blank import; nccl opens
//     libnccl with dlopen when a group is created, so this links no CUDA
//     library, and mpi is a stub unless built with -tags mpi.
//   - goddp/comm/internal holds what several of them share: auth (the
//     token handshake), wire (length-checked decoding) and reduce (the
//     reduction kernels, AVX sums included).
//   - goddp/comm/commtest is for tests: an in-memory ProcessGroup and
//     Store, and the conformance table every backend runs.
//
// This package itself is what a training script uses: Init, InitFromEnv
// and Config, the object collectives, and the aliases.
//
// # Joining a job
//
// Every process calls Init (torch's init_process_group) with a Config, or
// InitFromEnv, which reads the variables torchrun/ddprun, Kubernetes
// PyTorchJob, OpenMPI's mpirun and Slurm's srun set (see ConfigFromEnv).
// The processes meet at a key-value Store: with env:// rank 0 hosts a
// StoreServer at MASTER_ADDR:MASTER_PORT (unless GODDP_STORE_HOSTED=1 says
// the launcher does), with tcp://host:port the same at that address, and
// with file:///path they share a store file. A store serves one job at a
// time: a rank whose run id (GODDP_RUN_ID, TORCHELASTIC_RUN_ID), WORLD_SIZE
// or GODDP_BACKEND differs from rank 0's, or a second process claiming a
// rank already taken, is refused with both values named. Without a run id,
// a rank whose program or arguments (less per-rank flags such as --rank)
// differ from rank 0's is refused as a rank of another job, before it
// takes anyone's place, and the job waits on for its own rank; two jobs of
// the same program with the same arguments on one port still need a
// token, a run id or ports of their own (fingerprint.go). Backends are
// chosen by name from a registry (database/sql style): "auto", the
// default, picks shm when every rank is on one host, hier (shm within each
// host, tcp across them) when the ranks span hosts with the same number,
// more than one, on each, and tcp otherwise.
//
// # Ops and their results
//
// A ProcessGroup's ops are asynchronous: each returns a Work that is waited
// on with a context. All ranks must issue the same collectives in the same
// order; a group runs them one at a time, in that order. Capabilities beyond
// AllReduce, Broadcast and Barrier are optional interfaces reached through
// package functions (AllGather, ReduceScatter, Reduce, Gather, Scatter,
// AllToAll, Send, Recv), plus BarrierMonitor, Subgrouper and the gob-based
// BroadcastObject and AllGatherObject for small metadata. Avg reduces as a
// sum and divides once at the end; integer averages truncate.
//
// # Failure
//
// Nothing hangs. Every op has a deadline (Options.Timeout, 10 minutes by
// default). When a peer dies, a timeout passes or the group is closed,
// every pending and later op fails with an *OpError that wraps ErrPeerFailed,
// ErrTimeout or ErrClosed and names the collective (sequence number, op,
// bytes) and the rank(s) at fault; the other ranks hear the cause too. A
// stall inspector logs, after StallThreshold (60 s), which ranks have not
// reached a collective, and DebugCollectives checks that every rank issued
// the same op, dtype and size.
//
// # Security
//
// With a job token (GODDP_TOKEN, at least 16 bytes), every store and peer
// connection starts with a mutual HMAC-SHA256 challenge in which the
// connecting side proves the token first, so a stranger gets nothing to
// guess the token from offline; a process without the token is refused and
// the refusal is logged, without the token. ddprun hands its workers a
// token (a random one for a single-node job). Outside ddprun (srun, mpirun,
// Kubernetes, a hand-set MASTER_ADDR) Init refuses, on every rank, to run a
// job reachable beyond loopback without one, and says how to set it:
//
//	export GODDP_TOKEN=$(head -c 32 /dev/urandom | base64)   # the same on every node
//
// GODDP_INSECURE=1 (Config.Insecure) runs such a job unauthenticated, on a
// network you trust, and every rank prints a warning. Listeners bind to
// exactly the address given. The store bounds what a client can cost it
// (connections in the handshake, bytes held, deadlines: store.Config, the
// GODDP_STORE_* variables), and so does the peer listener. Wire decoders
// check every length against hard limits before allocating, and are
// fuzzed (FuzzStoreDecode, FuzzFrameDecode, FuzzHandshake, FuzzSegmentRecord).
package comm
