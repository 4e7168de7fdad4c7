package shm

import "github.com/goddp/goddp/internal/shmfile"

// The naming, creation and sweeping of this package's files in /dev/shm
// live in internal/shmfile (see the top of shmfile.go for why a creator
// holds a lock on its file), so that a launcher sweeps without linking
// this driver.

// SweepDead removes the files under /dev/shm that goddp processes left when
// they died: segments and shared buffers (goddp-shm-<pid>-*) whose creator
// was killed before every rank had mapped them. A file whose creator still
// runs, in this pid namespace or another, is never touched, nor is another
// user's. It returns the paths it removed; the error is only for a
// /dev/shm that cannot be listed, and files that cannot be opened or
// removed are skipped. It keeps no state and starts nothing, so any
// process may call it at any time, beside running jobs and other sweeps:
// every shm group does when it is created, and a launcher should when one
// of its workers dies.
func SweepDead() ([]string, error) { return shmfile.SweepDead() }

// shmMadvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), not in
// package syscall.
const shmMadvPopulateWrite = 23
