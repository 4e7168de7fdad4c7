package checkpoint

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/internal/procstat"
)

// dirState describes every file of dir (name, size, mode, mtime, SHA-256),
// to show that nothing in it changed.
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		fi, err := e.Info()
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s %d %v %d %x", e.Name(), fi.Size(), fi.Mode(), fi.ModTime().UnixNano(), sha256.Sum256(b)))
	}
	sort.Strings(out)
	return out
}

// liveWriter starts a process that stays alive for the test and returns it
// as a writer.
func liveWriter(t *testing.T) writer {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	start, _, ok := procstat.Stat(cmd.Process.Pid)
	require.True(t, ok)
	return writer{cmd.Process.Pid, start}
}

// endedWriter returns a process that has exited (and been reaped) as a
// writer; its start time is read while it is still a zombie.
func endedWriter(t *testing.T) writer {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	start, _, _ := procstat.Stat(cmd.Process.Pid)
	require.NoError(t, cmd.Wait())
	return writer{cmd.Process.Pid, start}
}

// tempOf is the name of a temporary file of base written by w.
func tempOf(w writer, base string) string {
	return strings.Replace(w.tempPattern(base), "*", "123456", 1)
}

// TestManagerSaveRemovesOnlyStaleTemps is issue 24's item 1: Save used to
// remove every temporary file in the directory, including the one another
// process was writing at that moment. Now a temporary file goes only once
// its writer (recorded in its name) has ended.
func TestManagerSaveRemovesOnlyStaleTemps(t *testing.T) {
	m, err := NewManager(t.TempDir(), Keep(2))
	require.NoError(t, err)
	defer m.Close()
	base := filepath.Base(m.Path(9, 90))
	live := liveWriter(t)
	keep := map[string]string{
		tempOf(live, base):       "a save of a live process, under way",
		"." + base + ".tmp-4711": "a name that records no writer",
	}
	gone := map[string]string{
		tempOf(endedWriter(t), base):                   "its writer has exited",
		tempOf(writer{live.pid, live.start + 1}, base): "its pid now belongs to a process started later",
	}
	for _, set := range []map[string]string{keep, gone} {
		for name := range set {
			require.NoError(t, os.WriteFile(filepath.Join(m.Dir(), name), []byte("partial"), 0o644))
		}
	}

	_, err = m.Save(fullCheckpoint(1, 10))
	require.NoError(t, err)
	for name, why := range keep {
		assert.FileExists(t, filepath.Join(m.Dir(), name), "kept: %s", why)
	}
	for name, why := range gone {
		assert.NoFileExists(t, filepath.Join(m.Dir(), name), "removed: %s", why)
	}

	// The temporary file of a save names this process as its writer.
	var seen []string
	require.NoError(t, WriteFileAtomic(m.Path(2, 20), func(w io.Writer) error {
		ents, err := os.ReadDir(m.Dir())
		for _, e := range ents {
			if wr, ok := tempWriter(e.Name()); ok && wr == self() {
				seen = append(seen, e.Name())
			}
		}
		_, werr := w.Write([]byte("x"))
		return errors.Join(err, werr)
	}))
	require.Len(t, seen, 1)
	assert.True(t, strings.HasPrefix(seen[0], ".ckpt-e00000002-s000000000020.safetensors.tmp-"+strconv.Itoa(os.Getpid())+"-"), seen[0])
}

// TestManagerSecondWriterRefused is issue 24's item 1: a second Manager
// saving into a directory another one writes (two jobs with the same
// relative -ckpt-dir) used to overwrite its same-named checkpoints and
// clear its temporary files. It is refused with ErrLocked, naming the
// directory and the holder's pid, and the directory is left exactly as it
// was; once the first releases the lock, the second may save.
func TestManagerSecondWriterRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := NewManager(dir, Keep(2))
	require.NoError(t, err)
	defer first.Close()
	saveAll(t, first, [2]int{1, 10}, [2]int{2, 20})
	// A save of the first job under way (a live process's temporary file).
	inFlight := tempOf(liveWriter(t), filepath.Base(first.Path(3, 30)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, inFlight), []byte("partial"), 0o644))
	before := dirState(t, dir)

	second, err := NewManager(dir, Keep(1))
	require.NoError(t, err)
	defer second.Close()
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"Save of a same-named checkpoint", func() error { _, err := second.Save(fullCheckpoint(2, 20)); return err }},
		{"Save", func() error { _, err := second.Save(fullCheckpoint(5, 50)); return err }},
		{"Lock", second.Lock},
	} {
		err := op.do()
		require.ErrorIs(t, err, ErrLocked, op.name)
		assert.Contains(t, err.Error(), dir, op.name)
		assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", os.Getpid()), op.name)
		assert.Contains(t, err.Error(), filepath.Join(dir, LockName), op.name)
		assert.Equal(t, before, dirState(t, dir), "%s: the refused Manager wrote, renamed or removed something", op.name)
	}
	// List and Latest need no lock.
	f, err := second.Latest()
	require.NoError(t, err)
	assert.Equal(t, first.Path(2, 20), f.Path)

	require.NoError(t, first.Close())
	_, err = second.Save(fullCheckpoint(5, 50))
	require.NoError(t, err, "the directory is free once the first Manager is closed")
	_, err = first.Save(fullCheckpoint(6, 60))
	require.ErrorIs(t, err, ErrLocked, "and now the second holds it")
}

// TestLockOnRank0 checks that when rank 0 cannot take the directory lock
// every rank fails at once, the others with rank 0's reason, and that only
// rank 0 takes the lock.
func TestLockOnRank0(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()

	run := func() []error {
		pgs := commtest.NewGroups(2, commtest.WithTimeout(20*time.Second))
		errs := make([]error, len(pgs))
		ms := make([]*Manager, len(pgs))
		var wg sync.WaitGroup
		for r, pg := range pgs {
			wg.Go(func() {
				m, err := NewManager(dir)
				if err != nil {
					errs[r] = err
					return
				}
				ms[r] = m
				errs[r] = LockOnRank0(ctx, pg, m)
			})
		}
		wg.Wait()
		t.Cleanup(func() {
			for _, m := range ms {
				m.Close()
			}
		})
		return errs
	}

	errs := run()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1], "rank 1 takes no lock, so it does not conflict with rank 0")

	began := time.Now()
	errs = run() // a second job while the first holds the directory
	require.ErrorIs(t, errs[0], ErrLocked)
	require.ErrorIs(t, errs[1], ErrRemote)
	for r, err := range errs {
		assert.Contains(t, err.Error(), dir, "rank %d", r)
		assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", os.Getpid()), "rank %d", r)
	}
	assert.Less(t, time.Since(began), 5*time.Second, "every rank fails at once")
}
