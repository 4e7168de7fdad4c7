// Package shmfile is the file protocol of comm/shm's segments and shared
// buffers in /dev/shm: how a file is named and created, and how one left by
// a dead process is told apart and swept. It is its own package so that a
// launcher can sweep after a dead worker (ddprun does) without linking the
// shm driver.
package shmfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/goddp/goddp/internal/procstat"
)

// Dir is where segments live; tmpfs, so pages never touch a disk.
const Dir = "/dev/shm"

// Files a dead job leaves in /dev/shm. A segment's or a shared buffer's
// name is removed as soon as every rank has mapped the file, so only a job
// killed in between (during set-up or an AllocShared) leaves one behind:
// rank 0 made it, and no rank got as far as unlinking it. Nobody of that
// job is left to remove it, so whoever comes next does: every shm group
// sweeps when it is created, and a launcher calls SweepDead when a worker
// dies.
//
// Telling a dead job's file from a live one's must not depend on pids
// alone: a pid is recycled, and a job in another pid namespace (a
// container sharing /dev/shm) has pids that mean nothing here. So the
// creator holds an exclusive flock on the file from before its name exists
// until it unlinks it: the file is made unnamed (O_TMPFILE), locked, sized,
// and only then linked under its name. The kernel drops the lock when the
// creator dies, however it dies; a sweeper that gets the lock knows the
// creator is gone, and one that does not leaves the file alone.
//
// The creator's pid and start time are in the name too
// (goddp-shm-<pid>-<start>-<random>[-arena]): for people looking at
// /dev/shm, and as a second check where the lock alone cannot tell. Where
// O_TMPFILE is missing the file is created under its name, then locked, so
// a sweeper may find it unlocked for a moment; its creator is alive then,
// with the start time in the name, so it is kept. A file of an older
// goddp, which took no lock, is kept while a process with its pid runs.

// namePrefix starts the name of every file comm/shm creates.
const namePrefix = "goddp-shm-"

// owner is the creator of a file, as its name records it; start is 0
// where unknown (older names, or no /proc when it was made).
type owner struct {
	pid   int
	start uint64
}

// RandomName returns a fresh file name for a segment or a shared buffer
// (which adds "-arena"): this process's pid and start time, which the sweep
// checks, and 64 random bits, which make collisions between concurrent
// jobs on one host negligible.
func RandomName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("comm: shm: random segment name: %w", err)
	}
	pid := os.Getpid()
	start := procstat.Start(pid)
	return fmt.Sprintf("%s%d-%d-%s", namePrefix, pid, start, hex.EncodeToString(b[:])), nil
}

// parseName reads the creator out of a name RandomName made (or an
// older goddp's goddp-shm-<pid>-<random>); ok is false for any other name.
func parseName(name string) (o owner, ok bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return o, false
	}
	rest = strings.TrimSuffix(rest, "-arena")
	f := strings.Split(rest, "-")
	if len(f) < 2 || len(f) > 3 || !isHex(f[len(f)-1]) {
		return o, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return o, false
	}
	o.pid = pid
	if len(f) == 3 {
		if o.start, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return o, false
		}
	}
	return o, true
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && s != ""
}

// SweepDead removes the files under /dev/shm that goddp processes left when
// they died: segments and shared buffers (goddp-shm-<pid>-*) whose creator
// was killed before every rank had mapped them. A file whose creator still
// runs, in this pid namespace or another, is never touched (see the top of
// shmfile.go), nor is another user's. It returns the paths it removed; the
// error is only for a /dev/shm that cannot be listed, and files that
// cannot be opened or removed are skipped. It keeps no state and starts
// nothing, so any process may call it at any time, beside running jobs and
// other sweeps: every shm group does when it is created, and a launcher
// should when one of its workers dies.
func SweepDead() ([]string, error) { return Sweep(Dir) }

// Sweep is SweepDead on the files of dir (tests sweep a directory of their own).
func Sweep(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("comm: shm: sweep %s: %w", dir, err)
	}
	var removed []string
	for _, e := range ents {
		o, ok := parseName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if removeIfDead(path, o) {
			removed = append(removed, path)
		}
	}
	return removed, nil
}

// removeIfDead unlinks path if its creator is gone: nobody holds its
// lock, and no process runs with the pid and start time of its name.
func removeIfDead(path string, o owner) bool {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var st, now syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != os.Geteuid() {
		return false
	}
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // the creator holds it: alive
	}
	if procstat.Alive(o.pid, o.start) {
		return false
	}
	// Held until the unlink: unlink the file that was checked, not one
	// that took its name meanwhile.
	if syscall.Lstat(path, &now) != nil || now.Ino != st.Ino || now.Dev != st.Dev {
		return false
	}
	return syscall.Unlink(path) == nil
}

// Not in package syscall.
const (
	oTmpfile        = 0o20000000 | syscall.O_DIRECTORY
	atFDCWD         = -100
	atSymlinkFollow = 0x400
)

// Create creates the file path (in /dev/shm; it must not exist)
// with total bytes reserved, and returns a descriptor holding the
// creator's lock: the caller keeps it open until it has unlinked path
// (see the top of this file). A full /dev/shm fails here with ENOSPC,
// not with SIGBUS on first touch, since the pages are reserved now.
func Create(path string, total int) (int, error) {
	fd, err := syscall.Open(filepath.Dir(path), syscall.O_RDWR|syscall.O_CLOEXEC|oTmpfile, 0o600)
	if err == nil {
		if err := prepare(fd, path, total); err != nil {
			syscall.Close(fd)
			return -1, err
		}
		err = linkFD(fd, path)
		if err == nil {
			return fd, nil
		}
		syscall.Close(fd)
		if !errors.Is(err, syscall.ENOENT) { // ENOENT: no /proc to link through; create it by name
			return -1, fmt.Errorf("comm: shm: create %s: %w", path, err)
		}
	}
	// No O_TMPFILE here (or no /proc): named first, locked at once.
	fd, err = syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, fmt.Errorf("comm: shm: create %s: %w", path, err)
	}
	if err := prepare(fd, path, total); err != nil {
		syscall.Unlink(path)
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// prepare locks a new file, sizes it and reserves its pages.
func prepare(fd int, path string, total int) error {
	// Blocking: a sweeper may hold the lock of a just-named file for the
	// moment it takes to see that its creator is alive.
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("comm: shm: lock %s: %w", path, err)
	}
	if err := syscall.Ftruncate(fd, int64(total)); err != nil {
		return fmt.Errorf("comm: shm: size %s to %d bytes: %w", path, total, err)
	}
	// tmpfs allocates pages lazily; fallocate reserves them now so that a
	// full /dev/shm fails here with ENOSPC instead of SIGBUS mid-collective.
	if err := syscall.Fallocate(fd, 0, 0, int64(total)); err != nil && !errors.Is(err, syscall.EOPNOTSUPP) {
		return fmt.Errorf("comm: shm: reserve %d bytes for %s (is /dev/shm large enough?): %w", total, path, err)
	}
	return nil
}

// linkFD gives the unnamed file fd the name path (linkat through
// /proc/self/fd, which needs no privilege, unlike AT_EMPTY_PATH).
func linkFD(fd int, path string) error {
	from, err := syscall.BytePtrFromString("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return err
	}
	to, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	cwd := atFDCWD
	_, _, e := syscall.Syscall6(syscall.SYS_LINKAT, uintptr(cwd), uintptr(unsafe.Pointer(from)),
		uintptr(cwd), uintptr(unsafe.Pointer(to)), atSymlinkFollow, 0)
	if e != 0 {
		return e
	}
	return nil
}
