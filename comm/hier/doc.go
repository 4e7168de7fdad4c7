// Package hier is goddp's "hier" comm backend: two-level collectives for
// jobs whose ranks span several hosts with more than one rank per host, as
// Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE and NCCL do. comm imports it,
// and "auto" picks it when every host runs the same number of ranks, more
// than one, on more than one host.
//
// # Model
//
// A hier group is built from three groups of registered backends, looked
// up by name (it imports no other backend):
//
//   - intra: the ranks of this host, over shared memory ("shm");
//   - inter: the ranks of every host that have this rank's local index,
//     over the network ("tcp"), one member per host;
//   - flat: every rank over the network ("tcp"), for the ops that have no
//     two-level form (reduce, gather, scatter, all-to-all, send/recv,
//     barrier, subgroups).
//
// A large all-reduce is a reduce-scatter within each host, an all-reduce
// of each shard across hosts between the ranks that hold the same shard
// (the inter backend picks a ring or a tree by size), and an all-gather
// within each host. Each host's link then carries the buffer's
// 2(M-1)/M once for M hosts, whatever the ranks per host, where a flat
// ring over every rank sends more and crosses links at every step. The
// three steps are pipelined in segments (Config.SegmentBytes), so the
// shared-memory steps of one segment overlap the network step of another.
// A small all-reduce is a shm all-reduce within the host followed by a
// network all-reduce of the whole buffer by every local rank in its inter
// group: the inputs are bitwise equal, and so are the results.
//
// Results are bitwise identical on every rank: each element is reduced
// along one deterministic chain (shm combines the ranks in rank order, the
// inter backend's algorithms give the same result on all of its ranks) and
// then copied. They equal the flat backend's results exactly wherever the
// order of a reduction does not matter (integers, and floats whose sums
// are exact); otherwise they differ from them by rounding only.
//
// Broadcast goes across hosts once, between the ranks with the root's
// local index, then within each host. All-gather and reduce-scatter are
// two-level too (network step between the ranks of one local index, shm
// step within the host, and a local permutation), so ZeRO's collectives
// also cross each link once.
//
// Ops run one at a time in issue order on the group's worker, which
// issues the sub-groups' ops in the same order on every rank. Every op
// fails by itself after the group's timeout (Options.Timeout); an error
// names the step that failed and the ranks at fault by global rank, node
// and host (OpError.Peers holds their global ranks), since the sub-group's
// own message numbers them its way. The first rank to see a fault records
// its culprit in the store, so that a rank which only saw a partner give
// up after it (a rank on another host) names the rank that failed first.
package hier
