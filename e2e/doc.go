// Package e2e is goddp's end-to-end fault suite. It has no library code:
// its tests build cmd/ddprun and examples/linear, run them as real processes
// on loopback, and inject the faults distributed training meets in practice,
// checking that each ends in a clear error or a clean recovery, never a hang,
// a lost checkpoint or a leftover process:
//
//   - kill -9 of one rank mid-step (with GODDP_TIMEOUT=10s and with the
//     default timeout): ddprun exits 1 promptly, names the dead rank as the
//     root cause, the survivor's error names it too, no worker remains;
//   - --max-restarts 1: a worker killed after a checkpoint; the job resumes
//     from that checkpoint and ends bit-identical to an uninterrupted run;
//   - SIGKILL of rank 0 in the middle of a checkpoint save: the previous
//     checkpoints load and a resumed run goes on;
//   - truncated, corrupted or foreign checkpoint files: skipped with a message
//     naming the file and the reason, or, when none loads, a clear error;
//   - dropped peer connections (sockets destroyed with `ss -K`), a frozen
//     peer (SIGSTOP), SIGSTOP then SIGKILL: errors, never a hang;
//   - a worker with the wrong GODDP_TOKEN, garbage bytes at the store and at
//     a peer listener: refused and logged, the job still completes;
//   - a rank stopped past GODDP_STALL_THRESHOLD: rank 0 logs which rank has
//     not arrived at which collective, and training completes;
//   - -timeline: a valid Chrome trace with forward, backward, bucket
//     all-reduce and optimizer events of both ranks.
//
// Every job runs under a deadline; running past it counts as a hang and
// fails the test. Run it with `go test ./e2e/` (about a minute on 2 cores);
// `go test -short` skips it. With -v, TestMain prints a tally of the faults
// injected, hangs and checkpoints lost.
package e2e
