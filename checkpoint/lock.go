package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockName is the file in a Manager's directory that carries the
// directory's advisory lock (flock) and the holder's pid and host. It is
// never removed: a process that opened it just before a removal would lock
// a file no one else sees, and two jobs would both think they own the
// directory.
const LockName = ".lock"

// Lock takes the directory's advisory lock (flock on LockName) for this
// Manager until Close, so that a second job pointed at the same directory
// is refused instead of overwriting this one's checkpoints and clearing the
// temporary file of its save in progress. Save takes the lock itself if
// Lock was not called; calling Lock when a job starts refuses the second
// job before it trains. The refusal wraps ErrLocked and names the
// directory, the lock file and the holder's pid and host; nothing is
// written then. Lock is idempotent. The kernel drops the lock when the
// holder exits, however it ends, so a killed job never leaves the
// directory locked.
//
// In a distributed job only the rank that writes (rank 0, see SaveOnRank0
// and LockOnRank0) takes it: two Managers of one directory exclude each
// other even inside one process.
func (m *Manager) Lock() error {
	if m.lock != nil {
		return nil
	}
	path := filepath.Join(m.dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint: lock %s: %w", m.dir, err)
	}
	if err := flockNB(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			dir, _ := filepath.Abs(m.dir)
			return fmt.Errorf("%w: %s: %s holds %s; wait for that job to end or give this one another checkpoint directory",
				ErrLocked, dir, lockHolder(path), filepath.Join(dir, LockName))
		}
		return fmt.Errorf("checkpoint: lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	rec := []byte(fmt.Sprintf("%d %s\n", os.Getpid(), host))
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(rec, 0)
	}
	// A failed write leaves the holder unnamed in a refusal, nothing worse:
	// the lock itself is held.
	m.lock = f
	return nil
}

// Close releases the directory lock, if this Manager holds it. List and
// Latest still work afterwards, and a later Save takes the lock again.
func (m *Manager) Close() error {
	if m.lock == nil {
		return nil
	}
	err := m.lock.Close() // closing the last descriptor drops the flock
	m.lock = nil
	if err != nil {
		return fmt.Errorf("checkpoint: unlock %s: %w", m.dir, err)
	}
	return nil
}

func flockNB(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}

// lockHolder describes the holder recorded in the lock file. The holder
// writes its pid just after taking the lock, so a refusal in that instant
// may read nothing yet, or the pid of the previous (ended) holder: it
// rereads for a moment until the pid it reads is a live process.
func lockHolder(path string) string {
	desc := "another process (pid unknown)"
	for try := 0; try < 20; try++ {
		b, err := os.ReadFile(path)
		if err == nil {
			f := strings.Fields(string(b))
			if len(f) > 0 {
				if pid, err := strconv.Atoi(f[0]); err == nil && pid > 0 {
					desc = "pid " + f[0]
					if len(f) > 1 {
						desc += " on host " + f[1]
					}
					if !(writer{pid: pid}).gone() {
						return desc
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return desc
}
