package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goddp/goddp/internal/procstat"
)

// Temp dirs that ddprun removes when it ends (the run's log dir, a build's
// scratch dir) stay behind when it is killed with SIGKILL, and nobody of that
// run is left to remove them. So the next ddprun does: the name of each such
// dir records its owner (<prefix>p<pid>-<start>-<random>, start being the
// process's start time in clock ticks since boot, which tells a recycled pid
// from the owner), and the owner holds an exclusive flock on the dir for as
// long as it uses it. The kernel drops the lock when the owner dies, however
// it dies. A sweeper removes a dir only when it gets the lock and no process
// runs with the pid and start time of the name: the lock alone protects a
// live owner in another pid namespace sharing the directory (a container),
// whose pid means nothing here; the name protects the moment between the
// dir's creation and its lock. Dirs without an owner in their name (an older
// ddprun's, or logs kept on purpose) are never touched, nor are another
// user's.

// ownedDir is a temp dir this process owns and holds the lock of.
type ownedDir struct {
	path string
	lock *os.File
}

// self is this process as owner names record it.
func self() owner {
	pid := os.Getpid()
	start := procstat.Start(pid)
	return owner{pid: pid, start: start}
}

// makeOwnedDir creates a fresh dir <prefix>p<pid>-<start>-<random> in
// parent and locks it. Remove it with remove.
func makeOwnedDir(parent, prefix string) (*ownedDir, error) {
	me := self()
	path, err := os.MkdirTemp(parent, fmt.Sprintf("%sp%d-%d-", prefix, me.pid, me.start))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err == nil {
		// Blocking: a sweeper may hold the lock of a just-made dir for the
		// moment it takes to see that its owner (this process) is alive.
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		_ = os.RemoveAll(path)
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &ownedDir{path: path, lock: f}, nil
}

// remove deletes the dir, then gives up its lock.
func (d *ownedDir) remove() {
	if d == nil {
		return
	}
	removeAllRetry(d.path)
	_ = d.lock.Close()
}

// removeAllRetry retries os.RemoveAll a few times: a process that has just
// lost its parent (a compiler under a killed `go build`) may still be
// writing into the tree for a moment.
func removeAllRetry(path string) bool {
	for i := 0; ; i++ {
		err := os.RemoveAll(path)
		if err == nil {
			return true
		}
		if i == 4 {
			return false
		}
		time.Sleep(time.Duration(10<<i) * time.Millisecond)
	}
}

// owner is the process that made an owned dir; start is 0 where /proc was
// not readable when it was made.
type owner struct {
	pid   int
	start uint64
}

// ownerTail matches what makeOwnedDir appends to the prefix.
var ownerTail = regexp.MustCompile(`^p([0-9]+)-([0-9]+)-[0-9]+$`)

// parseOwnedName reads the owner out of a name makeOwnedDir made with
// prefix, or out of any <prefix><anything>-p<pid>-<start>-<random> when
// anyID is set (the log dirs, whose prefix holds the --rdzv-id).
func parseOwnedName(name, prefix string, anyID bool) (owner, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return owner{}, false
	}
	if anyID {
		// The tail has exactly three dashes; the id before it may have any.
		i := len(rest)
		for range 3 {
			if i = strings.LastIndexByte(rest[:i], '-'); i < 0 {
				return owner{}, false
			}
		}
		rest = rest[i+1:]
	}
	m := ownerTail.FindStringSubmatch(rest)
	if m == nil {
		return owner{}, false
	}
	pid, err1 := strconv.Atoi(m[1])
	start, err2 := strconv.ParseUint(m[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return owner{}, false
	}
	return owner{pid: pid, start: start}, true
}

// sweepOwnedDirs removes the dirs in parent named by makeOwnedDir with
// prefix (any id between prefix and the owner with anyID) whose owner is
// gone, and returns their paths. A parent that cannot be listed sweeps
// nothing: the sweep is a courtesy to dead runs, never a reason to fail.
func sweepOwnedDirs(parent, prefix string, anyID bool) []string {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		o, ok := parseOwnedName(e.Name(), prefix, anyID)
		if !ok {
			continue
		}
		path := filepath.Join(parent, e.Name())
		if removeIfDead(path, o) {
			removed = append(removed, path)
		}
	}
	return removed
}

// removeIfDead removes the dir path if its owner o is gone: nobody holds
// its lock, and no process runs with o's pid and start time.
func removeIfDead(path string, o owner) bool {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var st, now syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() {
		return false
	}
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // its owner holds it: alive
	}
	if o.alive() {
		return false
	}
	// Held until the removal: remove the dir that was checked, not one
	// that took its name meanwhile.
	if syscall.Lstat(path, &now) != nil || now.Ino != st.Ino || now.Dev != st.Dev {
		return false
	}
	return removeAllRetry(path)
}

// alive reports whether a process with o's pid and start time runs. Where
// /proc cannot tell, it answers yes: keeping a dead run's dir is harmless,
// removing a live one's is not.
func (o owner) alive() bool { return procstat.Alive(o.pid, o.start) }
