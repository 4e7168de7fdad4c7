package checkpoint

import (
	"os"
	"strconv"
	"strings"

	"github.com/goddp/goddp/internal/procstat"
)

// A temporary file's name records which process writes it,
// ".<base>.tmp-<pid>-<start>-<random>", where start is the process's start
// time (field 22 of /proc/<pid>/stat; 0 where there is no /proc). A save
// may then clear what killed writers left behind without touching a file
// another live process is still writing: the pid alone is not enough, as
// pids are reused (a restarted container gets the same small pids again).

// writer identifies a process that writes temporary files.
type writer struct {
	pid   int
	start uint64
}

// self is this process as a writer.
func self() writer {
	pid := os.Getpid()
	start := procstat.Start(pid)
	return writer{pid, start}
}

// tempPattern is os.CreateTemp's pattern for a temporary file of base
// written by w.
func (w writer) tempPattern(base string) string {
	return "." + base + tempMarker + strconv.Itoa(w.pid) + "-" + strconv.FormatUint(w.start, 10) + "-*"
}

// tempWriter parses the writer out of a temporary file's name; ok is false
// for names that do not record one (temporary files of goddp before writers
// were recorded, or files that only look temporary).
func tempWriter(name string) (w writer, ok bool) {
	i := strings.LastIndex(name, tempMarker)
	if !strings.HasPrefix(name, ".") || i < 0 {
		return w, false
	}
	f := strings.Split(name[i+len(tempMarker):], "-")
	if len(f) != 3 {
		return w, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return w, false
	}
	return writer{pid, start}, true
}

// gone reports whether w has certainly ended: no process has its pid, or
// the one that has it started at another time (the pid was reused), or it
// is a zombie, which writes nothing more.
func (w writer) gone() bool { return !procstat.Alive(w.pid, w.start) }
