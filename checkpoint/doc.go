// Package checkpoint saves and restores training state in the safetensors
// format, safely: atomically, checksummed, from rank 0 only, and readable by
// PyTorch.
//
// # Format
//
// A checkpoint is one safetensors file (8-byte little-endian header length,
// a JSON header giving each tensor's dtype, shape and byte range, then the
// raw tensor bytes; see WriteSafetensors). Model tensors are stored under
// "model.<name>" with torch's dotted names, so torch loads them by stripping
// the prefix (scripts/check_safetensors_torch.py shows it and compares a
// torch model's outputs with goddp's). Optimizer and scheduler tensors go
// under "optimizer." and "scheduler."; epoch, step, optimizer scalars,
// sampler position, RNG state and the run's config go in the string
// metadata.
//
// The metadata also carries "goddp.sha256-4MiB" (ChunkedChecksumKey): the
// SHA-256 of the concatenated SHA-256 digests of the file's consecutive
// 4 MiB pieces, computed with the digest's own 64 characters zeroed. The
// pieces are hashed on every core, while Save writes them and when Load
// verifies them: one SHA-256 stream (0.75-1.2 GB/s on one core) is slower
// than the disk. Files written before 2026-11-29 carry "goddp.sha256"
// (ChecksumKey, the SHA-256 of the whole file, zeroed the same way) and
// still verify. Either way every byte is covered, so a corrupt or truncated
// file gives an error wrapping ErrCorrupt that names the file. The reader checks every size in the header against the
// bytes present before allocating anything, refuses a header that gives a
// key twice (encoding/json would keep the last one silently, other readers
// the first), and is fuzzed (FuzzSafetensors).
//
// # Durability
//
// Save (and Manager.Save) writes to a temporary file in the target directory,
// fsyncs it, renames it over the target and fsyncs the directory, so a crash
// or SIGKILL at any instant leaves the previous checkpoint intact (a test
// kills a saving child process to show it). Manager keeps the newest K
// checkpoints and Latest returns the newest one that verifies, listing the
// corrupt ones it skipped and why; a file it cannot read at all (EACCES,
// EIO, ESTALE) is not skipped but stops Latest with an error naming it, as
// falling back would roll training back. Manager.Save never deletes the
// file it has just written: when valid checkpoints named after it already
// exist (a rollback, or a fresh run in a used directory), it keeps
// everything and returns ErrShadowed naming them.
//
// # One writer per directory
//
// The Manager that saves holds an advisory lock (flock) on its directory
// until Close, taken by Lock or by its first Save, so a second job given the
// same directory is refused with ErrLocked, naming the directory and the
// holder's pid, before it writes anything. A temporary file's name records
// its writer's pid and start time, and Save removes only those whose writer
// has ended.
//
// # Distributed use
//
// LockOnRank0 takes the directory lock on rank 0 when a job starts and tells
// every rank the outcome, so a refused job stops on all ranks at once.
// SaveOnRank0 saves on rank 0 while the other ranks wait, and tells every
// rank the outcome. To resume, either call Load on every rank (shared file
// system) or LoadLatestAndBroadcast, which reads the file on rank 0 only and
// broadcasts its bytes; every rank verifies the checksum itself. With no
// checkpoint, every rank gets ErrNotFound and can start fresh.
//
// StateDict and LoadStateDict move an nn.Module's parameters and buffers in
// and out (in place, with torch's strict-mode key checks). OptimizerState
// has the fields of optim.StateDict, so the two convert directly.
package checkpoint
