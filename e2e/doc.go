// Package e2e is goddp's end-to-end fault suite. It has no library code:
// its tests build cmd/ddprun and examples/linear, run them as real processes
// on loopback, and inject the faults distributed training meets in practice,
// checking that each ends in a clear error or a clean recovery, never a hang,
// a lost checkpoint or a leftover process:
//
//   - kill -9 of one rank mid-step on 2, 3 and 4 ranks (with
//     GODDP_TIMEOUT=10s and with the default timeout): with ddprun frozen
//     meanwhile, every survivor detects the death itself and names the dead
//     rank (a launcher's stop does not count); ddprun then exits 1 with the
//     root cause and no worker remains; without a launcher each survivor's
//     own error names the dead rank within 2x the timeout;
//   - a rank frozen with SIGSTOP on 2, 3 and 4 ranks without a launcher (a
//     silent blackhole: nothing resets): every survivor times out within 2x
//     GODDP_TIMEOUT naming the frozen rank;
//   - the checkpoint file system filling up (a 1 MiB tmpfs) during a save:
//     every rank fails naming the file and ENOSPC, no temporary file is
//     left, the earlier checkpoints load and the job resumes from them;
//   - a program whose ranks issue different collectives (reduce op, size,
//     kind) under GODDP_DEBUG_COLLECTIVES=1: both ranks fail at once naming
//     the other's call (testdata/collprobe); on tcp without it (reduce op,
//     size, dtype, kind; 2 and 3 ranks), every rank fails within 5 s naming
//     both collectives (mismatch_test.go);
//   - --max-restarts 1: a worker killed after a checkpoint; the job resumes
//     from that checkpoint and ends bit-identical to an uninterrupted run;
//   - SIGKILL of rank 0 in the middle of a checkpoint save (caught with
//     inotify and SIGSTOP): the previous checkpoints load, and a run resumed
//     by hand or by --max-restarts goes on, bit-identical to an
//     uninterrupted one;
//   - truncated, corrupted or foreign checkpoint files: skipped with a message
//     naming the file and the reason, or, when none loads, a clear error;
//   - two jobs started in one directory (one -ckpt-dir): the second is
//     refused before training, naming the directory and the first job's
//     pid, and not one file of the first (a save under way included)
//     changes; an unreadable newest checkpoint (a real EACCES, via
//     testdata/nodac as root): the resume fails naming the file, nothing is
//     renamed or deleted (ckptdir_test.go);
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
//   - a busy laggard, rank 0 included, named by every other rank past the
//     stall threshold (never "no answer"), and tcp timeouts on 3+ ranks that
//     blame only the frozen rank;
//   - no token off loopback: every rank refuses at once, naming GODDP_TOKEN;
//     GODDP_INSECURE=1 runs and warns on every rank;
//   - -timeline: a valid Chrome trace with forward, backward, bucket
//     all-reduce and optimizer events of both ranks.
//
// TestAuth requires strace (to hold a rank's connect(2) so that the peer
// listener can be probed) and ss, and fails without them (scripts/setup-test.sh
// installs both). Subtests that need what a machine may lack skip, saying
// so: `ss -K` (socket destruction, root and CONFIG_INET_DIAG_DESTROY) and
// mounting a tmpfs (root).
//
// Every job runs under a deadline; running past it counts as a hang and
// fails the test. Run it with `go test ./e2e/`; `go test -short` skips it.
// Its time is mostly the jobs' own (two ranks each, several at once), so it
// grows as cores get fewer or busier: about 50 s with two idle cores, 90 s
// with the same two loaded. With -v,
// TestMain prints a tally of the faults injected, hangs and checkpoints lost.
//
// TestManagerKeepsValidCheckpointsBehindCorruptOnes exercises
// checkpoint.Manager directly: it guards a bug found by this suite.
package e2e
