// Package e2e is goddp's end-to-end fault suite. It has no library code:
// its tests build cmd/ddprun and examples/linear, run them as real processes
// on loopback, and inject the faults distributed training meets in practice,
// checking that each ends in a clear error or a clean recovery, never a hang,
// a lost checkpoint or a leftover process:
//
//   - kill -9 of one rank mid-step (with GODDP_TIMEOUT=10s and with the
//     default timeout): ddprun exits 1 promptly, names the dead rank as the
//     root cause, no worker remains; without a launcher the survivor's own
//     error names the dead rank within 2x the timeout;
//   - --max-restarts 1: a worker killed after a checkpoint; the job resumes
//     from that checkpoint and ends bit-identical to an uninterrupted run;
//   - SIGKILL of rank 0 in the middle of a checkpoint save (caught with
//     inotify and SIGSTOP): the previous checkpoints load, and a run resumed
//     by hand or by --max-restarts goes on, bit-identical to an
//     uninterrupted one;
//   - truncated, corrupted or foreign checkpoint files: skipped with a message
//     naming the file and the reason, or, when none loads, a clear error;
//   - dropped peer connections (sockets destroyed with `ss -K`), a frozen
//     peer (SIGSTOP), SIGSTOP then SIGKILL: errors, never a hang;
//   - a worker with the wrong GODDP_TOKEN or none, garbage bytes at the store
//     and at a peer listener: refused and logged (never the token), every
//     listener on loopback only, and the job still completes;
//   - SIGINT, SIGTERM and SIGKILL to ddprun itself: forwarded, or the workers
//     die with it (Pdeathsig); nothing remains;
//   - a rank stopped past GODDP_STALL_THRESHOLD: rank 0 logs which rank has
//     not arrived at which collective, and training completes;
//   - GODDP_DEBUG_COLLECTIVES=1 on a correct program: no false alarm;
//   - -timeline: a valid Chrome trace with forward, backward, bucket
//     all-reduce and optimizer events of both ranks.
//
// Some subtests need root tools and skip without them: `ss -K` (socket
// destruction) and strace (to hold a rank's connect(2) so that the peer
// listener can be probed).
//
// Every job runs under a deadline; running past it counts as a hang and
// fails the test. Run it with `go test ./e2e/` (about 50 s on an idle 2-core
// machine, 90 s on a loaded one); `go test -short` skips it. With -v,
// TestMain prints a tally of the faults injected, hangs and checkpoints lost.
//
// TestManagerKeepsValidCheckpointsBehindCorruptOnes exercises
// checkpoint.Manager directly: it guards a bug found by this suite.
package e2e
