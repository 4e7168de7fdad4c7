package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killsVar sets how many kills TestKill9Rank0StartupLeavesNoShm makes
// (issue 24's bar is 50, the default).
const killsVar = "GODDP_E2E_SHM_KILLS"

// TestKill9Rank0StartupLeavesNoShm kills rank 0 of a 2-rank shm job with
// SIGKILL at random moments of its start-up, 50 times, then runs one more
// job to its end: no goddp-shm-* file of any of these processes may be
// left in /dev/shm after it. Rank 0 creates the segment, then the shared
// buckets, and removes each name once every rank has mapped the file; a
// kill in between leaves the file with nobody to remove it, so a third of
// the kills come at random (anywhere in start-up), a third the moment
// rank 0's segment appears and a third when its shared buffer does, up to
// 300 us later: the moments that leak.
func TestKill9Rank0StartupLeavesNoShm(t *testing.T) {
	skipShort(t)
	kills := 50
	if v := os.Getenv(killsVar); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, killsVar)
		kills = n
	}
	watch := watchShmCreates(t)
	env := []string{"GODDP_BACKEND=shm", "GODDP_TIMEOUT=10s"}
	args := []string{"-epochs", "1", "-ckpt-dir", ""}
	var pids []int // every process started: a file may carry any of them
	hits := map[string]int{}
	began := time.Now()
	for i := range kills {
		ws := startWorkers(t, 2, env, args...)
		victim := ws[0].cmd.Process.Pid
		pids = append(pids, victim, ws[1].cmd.Process.Pid)
		mode := []string{"random", "segment", "arena"}[i%3]
		switch mode {
		case "random":
			time.Sleep(time.Duration(rand.Int64N(int64(150 * time.Millisecond))))
			_ = syscall.Kill(victim, syscall.SIGKILL)
			hits[mode]++
		default:
			// The watcher kills from its own goroutine, at once, the
			// moment the file appears.
			fired := watch.arm(victim, mode == "arena", 300*time.Microsecond)
			select {
			case <-fired:
				hits[mode]++
			case <-ws[0].done: // exited first (finished, or failed)
			case <-time.After(10 * time.Second):
			}
			watch.disarm()
			_ = syscall.Kill(victim, syscall.SIGKILL)
		}
		tally.faults.Add(1)
		<-ws[0].done
		_ = syscall.Kill(ws[1].cmd.Process.Pid, syscall.SIGKILL)
		<-ws[1].done
	}
	left := shmFilesOf(t, pids)
	t.Logf("%d kills of rank 0 in %v (%v); before the next run %d files of theirs in /dev/shm: %v",
		kills, time.Since(began).Round(time.Millisecond), hits, len(left), left)

	// The next run: it must end normally and leave nothing either.
	ws := startWorkers(t, 2, env, args...)
	for _, w := range ws {
		code, _ := w.wait(t, time.Now(), 60*time.Second)
		require.Zero(t, code, "rank %d of the next run:\n%s", w.rank, w.stderr.String())
		pids = append(pids, w.cmd.Process.Pid)
	}
	assert.Empty(t, shmFilesOf(t, pids), "files in /dev/shm left by the killed jobs after the next run")
}

// shmFilesOf lists the goddp-shm-<pid>-* files in /dev/shm of pids.
func shmFilesOf(t *testing.T, pids []int) []string {
	t.Helper()
	var out []string
	for _, pid := range pids {
		m, err := filepath.Glob(fmt.Sprintf("/dev/shm/goddp-shm-%d-*", pid))
		require.NoError(t, err)
		out = append(out, m...)
	}
	return out
}

// shmWatch watches /dev/shm (inotify) and, once armed, kills a process
// the moment a file of its appears there.
type shmWatch struct {
	mu     sync.Mutex
	pid    int           // armed for this creator; 0: disarmed
	arena  bool          // for its shared buffer, else its segment
	jitter time.Duration // kill up to this long after the file appears
	fired  chan struct{}
}

func watchShmCreates(t *testing.T) *shmWatch {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	require.NoError(t, err)
	_, err = syscall.InotifyAddWatch(fd, "/dev/shm", syscall.IN_CREATE|syscall.IN_MOVED_TO)
	require.NoError(t, err)
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a pending Read
	w := &shmWatch{}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				start := off + syscall.SizeofInotifyEvent
				off = start + int(ev.Len)
				w.saw(string(bytes.TrimRight(buf[start:min(off, n)], "\x00")))
			}
		}
	}()
	t.Cleanup(func() { f.Close() })
	return w
}

// arm makes the watcher kill pid when its segment (or shared buffer)
// appears; the channel closes once it has.
func (w *shmWatch) arm(pid int, arena bool, jitter time.Duration) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pid, w.arena, w.jitter, w.fired = pid, arena, jitter, make(chan struct{})
	return w.fired
}

func (w *shmWatch) disarm() {
	w.mu.Lock()
	w.pid = 0
	w.mu.Unlock()
}

func (w *shmWatch) saw(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pid == 0 || !strings.HasPrefix(name, fmt.Sprintf("goddp-shm-%d-", w.pid)) || strings.HasSuffix(name, "-arena") != w.arena {
		return
	}
	for until := time.Now().Add(time.Duration(rand.Int64N(int64(w.jitter) + 1))); time.Now().Before(until); {
		// spin: a sleep would take far longer than the jitter
	}
	_ = syscall.Kill(w.pid, syscall.SIGKILL)
	close(w.fired)
	w.pid = 0
}
