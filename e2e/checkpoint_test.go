package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/checkpoint"
)

// watchCreates reports the names of files created in dir (inotify).
func watchCreates(t *testing.T, dir string) <-chan string {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	require.NoError(t, err)
	_, err = syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE)
	require.NoError(t, err)
	f := os.NewFile(uintptr(fd), "inotify")
	t.Cleanup(func() { f.Close() })
	ch := make(chan string, 1024)
	go func() {
		defer close(ch)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
				off += syscall.SizeofInotifyEvent + int(ev.Len)
				select {
				case ch <- string(bytes.TrimRight(name, "\x00")):
				default:
				}
			}
		}
	}()
	return ch
}

func isTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// killMidSave watches ck and, the moment a temporary checkpoint file appears
// (inotify) once at least 3 complete checkpoints exist, stops pid (SIGSTOP);
// if the file is still there, the save is under way and pid is killed
// (SIGKILL), else it goes on and the next save is tried. It returns the
// temporary file's name and the complete checkpoints at the time of the kill.
func killMidSave(t *testing.T, j *job, creates <-chan string, ck string, pid int) (string, []string) {
	t.Helper()
	tries := 0
	deadline := time.After(60 * time.Second)
	for {
		var name string
		select {
		case name = <-creates:
		case <-deadline:
			t.Fatalf("no save caught in 60s (%d tries)\n%s", tries, j.stderr.String())
		case <-j.done:
			t.Fatalf("job ended (exit %d) before a save was caught (%d tries)\n%s", j.code, tries, j.stderr.String())
		}
		// Let a few saves complete first, so there is a previous
		// checkpoint to lose.
		if !isTempName(name) || len(completeCheckpoints(t, ck)) < 3 {
			continue
		}
		tries++
		signal(t, pid, syscall.SIGSTOP)
		waitStopped(t, pid)
		if _, err := os.Stat(filepath.Join(ck, name)); err == nil {
			before := completeCheckpoints(t, ck)
			j.inject(pid, syscall.SIGKILL)
			t.Logf("killed in the middle of writing %s (caught on try %d); complete checkpoints: %d", name, tries, len(before))
			return name, before
		}
		signal(t, pid, syscall.SIGCONT)
	}
}

// TestSIGKILLDuringSave kills rank 0 of the example with SIGKILL while it
// writes a checkpoint (see killMidSave). Every complete checkpoint must still
// load, and a run on the directory resumes from the newest one and proceeds,
// clearing the leftover temporary file: started by hand after the job failed,
// or by ddprun's restart, in which case the job's final checkpoint is
// bit-identical to an uninterrupted run's.
func TestSIGKILLDuringSave(t *testing.T) {
	skipShort(t)
	t.Run("resumed by hand", func(t *testing.T) {
		dir := t.TempDir()
		ck := filepath.Join(dir, "ck")
		require.NoError(t, os.Mkdir(ck, 0o755))
		creates := watchCreates(t, ck)
		j := start(t, spec{dir: dir, args: []string{"-epochs", "100000", "-save-every", "1", "-ckpt-dir", "ck"},
			env: []string{"GODDP_TIMEOUT=10s"}})
		ws := j.workers(2, 0, 30*time.Second)
		leftover, before := killMidSave(t, j, creates, ck, ws[0])
		code, _ := j.wait(40 * time.Second)
		assert.Equal(t, 1, code)
		assert.Contains(t, j.stderr.String(), "cause      : signal SIGKILL")
		j.requireNoLeftovers()

		_, err := os.Stat(filepath.Join(ck, leftover))
		require.NoError(t, err, "the killed save's temporary file")
		after := completeCheckpoints(t, ck)
		require.Equal(t, before, after, "the kill changed the complete checkpoints")
		for _, p := range after {
			if _, err := checkpoint.Load(p); !assert.NoError(t, err, "checkpoint %s after the kill", p) {
				tally.ckptLost.Add(1)
			}
		}
		newest := epochOf(t, after[0])

		r := start(t, spec{dir: dir, args: []string{"-epochs", strconv.Itoa(newest + 3), "-save-every", "1", "-ckpt-dir", "ck"},
			env: []string{"GODDP_TIMEOUT=10s"}})
		code, _ = r.wait(60 * time.Second)
		require.Equal(t, 0, code, r.stderr.String())
		out := r.stdout.String()
		assert.Contains(t, out, fmt.Sprintf("Resumed from epoch %d ", newest))
		assert.NotContains(t, out, "Skipped checkpoint")
		assert.Contains(t, out, fmt.Sprintf("Epoch %d | Training checkpoint saved", newest+2))
		_, err = os.Stat(filepath.Join(ck, leftover))
		assert.ErrorIs(t, err, os.ErrNotExist, "the next save clears the killed save's temporary file")
	})

	t.Run("max-restarts 1 bit-identical", func(t *testing.T) {
		const epochs = 60
		args := func(ck string) []string {
			return []string{"-epochs", strconv.Itoa(epochs), "-save-every", "1", "-ckpt-dir", ck, "-seed", "3"}
		}
		ref := start(t, spec{args: args("ref")})
		code, _ := ref.wait(60 * time.Second)
		require.Equal(t, 0, code, ref.stderr.String())

		dir := t.TempDir()
		ck := filepath.Join(dir, "ck")
		require.NoError(t, os.Mkdir(ck, 0o755))
		creates := watchCreates(t, ck)
		j := start(t, spec{dir: dir, args: args("ck"), launcher: []string{"--max-restarts", "1"},
			env: []string{"GODDP_TIMEOUT=10s"}})
		ws := j.workers(2, 0, 30*time.Second)
		leftover, before := killMidSave(t, j, creates, ck, ws[0])
		code, _ = j.wait(60 * time.Second)
		require.Equal(t, 0, code, j.stderr.String())
		out := j.stdout.String()
		if !assert.Contains(t, out, fmt.Sprintf("Resumed from epoch %d ", epochOf(t, before[0]))) {
			tally.ckptLost.Add(1)
		}
		assert.NotContains(t, out, "Skipped checkpoint")
		_, err := os.Stat(filepath.Join(ck, leftover))
		assert.ErrorIs(t, err, os.ErrNotExist, "the resumed run's first save clears the temporary file")
		final := fmt.Sprintf("ckpt-e%08d-", epochs-1)
		requireBitIdentical(t, finalCheckpoint(t, ref.dir+"/ref", final), finalCheckpoint(t, ck, final))
	})
}

// completeCheckpoints lists dir's checkpoints, newest first.
func completeCheckpoints(t *testing.T, dir string) []string {
	t.Helper()
	m, err := checkpoint.NewManager(dir)
	require.NoError(t, err)
	ls, err := m.List()
	require.NoError(t, err)
	return ls
}

var ckptName = regexp.MustCompile(`ckpt-e(\d+)-s(\d+)\.safetensors$`)

func epochOf(t *testing.T, path string) int {
	t.Helper()
	m := ckptName.FindStringSubmatch(path)
	require.NotNil(t, m, path)
	e, _ := strconv.Atoi(m[1])
	return e
}

// TestCorruptCheckpoints starts the example on a checkpoint directory whose
// newest files were damaged. checkpoint.Manager documents that the newest
// valid checkpoint is used and newer corrupt ones are skipped with the
// reason; the trainer prints "Skipped checkpoint FILE: REASON" for each and
// resumes from the newest valid one. When no file loads, every rank fails
// with an error naming the files (rank 0 as the root cause), and the files
// are left as they were.
func TestCorruptCheckpoints(t *testing.T) {
	skipShort(t)
	base := t.TempDir()
	ref := start(t, spec{dir: base, args: []string{"-epochs", "11", "-save-every", "5", "-ckpt-dir", "ck"}})
	code, _ := ref.wait(60 * time.Second)
	require.Equal(t, 0, code, ref.stderr.String())
	names := []string{"ck/ckpt-e00000010-s000000000352.safetensors", "ck/ckpt-e00000005-s000000000192.safetensors",
		"ck/ckpt-e00000000-s000000000032.safetensors"}
	for _, n := range names {
		_, err := checkpoint.Load(filepath.Join(base, n))
		require.NoError(t, err)
	}
	foreign := func() []byte { // a valid safetensors file without goddp's checksum
		hdr := `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
		b := []byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}
		return append(append(b, hdr...), 0, 0, 128, 63)
	}

	type damage func(t *testing.T, path string)
	truncate := func(t *testing.T, p string) {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(p, st.Size()/2))
	}
	flip := func(t *testing.T, p string) { // one bit of the last tensor byte
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[len(b)-1] ^= 1
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	write := func(b []byte) damage {
		return func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, b, 0o644)) }
	}
	tests := []struct {
		name    string
		damage  damage
		n       int    // how many of the newest files get it
		reason  string // in the skip message
		resumed int    // epoch resumed from; -1: no file loads
	}{
		{"truncated newest", truncate, 1, "truncated", 5},
		{"bit flip in newest", flip, 1, "checksum mismatch", 5},
		{"garbage newest", write([]byte(strings.Repeat("garbage!", 512))), 1, "header length", 5},
		{"empty newest", write(nil), 1, "0 bytes, too short", 5},
		{"foreign safetensors newest", write(foreign()), 1, "not a goddp checkpoint", 5},
		{"two newest truncated", truncate, 2, "truncated", 0},
		{"all corrupt", flip, 3, "checksum mismatch", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, "ck"), 0o755))
			for _, n := range names {
				b, err := os.ReadFile(filepath.Join(base, n))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
			}
			damaged := map[string][]byte{}
			for _, n := range names[:tc.n] {
				tc.damage(t, filepath.Join(dir, n))
				tally.faults.Add(1)
				damaged[n], _ = os.ReadFile(filepath.Join(dir, n))
			}
			j := start(t, spec{dir: dir, args: []string{"-epochs", "12", "-save-every", "5", "-ckpt-dir", "ck"}})
			code, _ := j.wait(60 * time.Second)
			out, errs := j.stdout.String(), j.stderr.String()
			if tc.resumed < 0 {
				assert.Equal(t, 1, code)
				assert.Contains(t, errs, "rank       : 0 (local rank 0")
				assert.Contains(t, errs, "no checkpoint in ck loads")
				for _, n := range names {
					assert.Contains(t, errs, n+": "+tc.reason, "the error names every file and why")
				}
				for n, b := range damaged {
					now, err := os.ReadFile(filepath.Join(dir, n))
					require.NoError(t, err)
					assert.Equal(t, b, now, "%s was modified", n)
				}
				assert.NotContains(t, out, "Epoch 0 |", "no training over unreadable checkpoints")
				return
			}
			require.Equal(t, 0, code, errs)
			for _, n := range names[:tc.n] {
				assert.Regexp(t, "Skipped checkpoint "+regexp.QuoteMeta(n)+": checkpoint: corrupt or truncated file: "+
					regexp.QuoteMeta(n)+": .*"+tc.reason+".*; moved to "+regexp.QuoteMeta(n)+`\.corrupt`, out)
				// Kept aside for inspection, byte for byte.
				b, err := os.ReadFile(filepath.Join(dir, n+".corrupt"))
				require.NoError(t, err)
				assert.Equal(t, damaged[n], b)
			}
			// Manager keeps the newest 3 valid checkpoints (the quarantined
			// files no longer count): 0, 5 and 10, or 5, 10 after resuming from 5.
			left := completeCheckpoints(t, filepath.Join(dir, "ck"))
			for _, p := range left {
				_, err := checkpoint.Load(p)
				assert.NoError(t, err)
			}
			assert.Len(t, left, 3)
			m := resumedRe.FindStringSubmatch(out)
			require.NotNil(t, m, out)
			if !assert.Equal(t, strconv.Itoa(tc.resumed), m[1], "resumed from the newest valid checkpoint") {
				tally.ckptLost.Add(1)
			}
			// The run rewrote epoch 10's checkpoint; it loads now.
			_, err := checkpoint.Load(filepath.Join(dir, names[0]))
			assert.NoError(t, err)
		})
	}
}
