package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Manager keeps the checkpoints of one run in a directory, named
// ckpt-e<epoch>-s<step>.safetensors, keeps the newest K, and finds the newest
// one that loads. The Manager that saves holds the directory's lock (see
// Lock) until Close.
type Manager struct {
	dir  string
	keep int
	lock *os.File // the flocked LockName; nil when not held
}

// ManagerOption configures NewManager.
type ManagerOption func(*Manager)

// Keep sets how many checkpoints to keep (default 3; 0 keeps all).
func Keep(k int) ManagerOption { return func(m *Manager) { m.keep = k } }

// NewManager uses dir, creating it if needed. It does not lock dir: Lock
// (or the first Save) does.
func NewManager(dir string, opts ...ManagerOption) (*Manager, error) {
	m := &Manager{dir: dir, keep: 3}
	for _, o := range opts {
		o(m)
	}
	if m.keep < 0 {
		return nil, fmt.Errorf("checkpoint: keep %d must be >= 0", m.keep)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return m, nil
}

// Dir is the managed directory.
func (m *Manager) Dir() string { return m.dir }

// Path is the file name a checkpoint of this epoch and step gets.
func (m *Manager) Path(epoch, step int) string {
	return filepath.Join(m.dir, fmt.Sprintf("ckpt-e%08d-s%012d.safetensors", epoch, step))
}

type listed struct {
	path        string
	epoch, step int
}

// List returns the checkpoint files, newest (highest epoch, then step) first.
// Temporary files of interrupted saves are not listed.
func (m *Manager) List() ([]string, error) {
	ls, err := m.list()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.path
	}
	return out, nil
}

func (m *Manager) list() ([]listed, error) {
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var ls []listed
	for _, e := range ents {
		var l listed
		var tail string
		n, _ := fmt.Sscanf(e.Name(), "ckpt-e%d-s%d.safetenso%s", &l.epoch, &l.step, &tail)
		if n != 3 || tail != "rs" || e.IsDir() || e.Name() != filepath.Base(m.Path(l.epoch, l.step)) {
			continue
		}
		l.path = filepath.Join(m.dir, e.Name())
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].epoch != ls[j].epoch {
			return ls[i].epoch > ls[j].epoch
		}
		return ls[i].step > ls[j].step
	})
	return ls, nil
}

// Save writes c atomically as the checkpoint for (c.Epoch, c.Step), then
// deletes all but the newest Keep checkpoints and the temporary files that
// killed saves left behind. It returns the new file's path.
//
// Save first takes the directory's lock (see Lock); when another job holds
// it, Save writes and deletes nothing and returns an error wrapping
// ErrLocked. A temporary file is deleted only once the process that wrote
// it has ended (its name records the writer, see writer.go), never while a
// save of another process may still be writing it; temporary files whose
// name records no writer are left alone.
//
// The file just written is never deleted. If the directory already holds a
// valid checkpoint with a higher (epoch, step) name (after a rollback to an
// older checkpoint, or a fresh run in a directory another run used), Latest
// would resume from that one instead of this save, and counting names
// would prune this save first. Save then keeps its file, deletes nothing,
// and returns its path with an error wrapping ErrShadowed that names the
// newer files, so the caller can move them away (or, having rolled back on
// purpose, delete them) before the next save.
func (m *Manager) Save(c *Checkpoint) (string, error) {
	if err := m.Lock(); err != nil {
		return "", err
	}
	m.removeStaleTemps()
	path := m.Path(c.Epoch, c.Step)
	if err := Save(path, c); err != nil {
		return "", err
	}
	ls, err := m.list()
	if err != nil {
		return path, fmt.Errorf("checkpoint: saved %s but could not list %s to prune: %w", path, m.dir, err)
	}
	if newer := m.newerValid(ls, c.Epoch, c.Step); len(newer) > 0 {
		return path, fmt.Errorf("%w: saved %s, but %s holds %d valid checkpoint(s) named after it (newest %s), "+
			"from before a rollback or from another run; Latest would resume from them, so nothing was pruned: "+
			"move them out of the directory", ErrShadowed, path, m.dir, len(newer), newer[0])
	}
	if m.keep > 0 {
		if err := m.prune(ls, path); err != nil {
			return path, fmt.Errorf("checkpoint: saved %s but could not prune: %w", path, err)
		}
	}
	return path, nil
}

// newerValid returns the checkpoints in ls (newest first) named after
// (epoch, step) that load, or that cannot be read: damaged ones do not
// count, as Latest skips them, but Latest stops at an unreadable one.
func (m *Manager) newerValid(ls []listed, epoch, step int) []string {
	var out []string
	for _, l := range ls {
		if l.epoch < epoch || (l.epoch == epoch && l.step <= step) {
			break
		}
		if _, err := Load(l.path); !damaged(err) {
			out = append(out, l.path)
		}
	}
	return out
}

// prune keeps the newest Keep checkpoints that load, counting newest first.
// Save calls it only when saved is the newest valid checkpoint, and saved is
// always counted as kept and never removed, whatever the listing says.
// A file that does not load (corrupt, truncated, or a stale one a resumed run
// has not overwritten yet) is not counted, so it can never push a valid
// checkpoint out; it is left in place for inspection while it is inside the
// kept window and removed once Keep valid checkpoints are newer. Verifying
// re-reads at most Keep files per save.
func (m *Manager) prune(ls []listed, saved string) error {
	kept := 1 // saved
	var errs []error
	for _, l := range ls {
		if l.path == saved {
			continue
		}
		if kept < m.keep {
			if _, err := Load(l.path); err == nil {
				kept++
			}
			continue
		}
		if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeStaleTemps deletes the temporary files whose writer has ended.
// Temporary files of this process are not among them: WriteFileAtomic
// removes its own on failure, and any other is a save still under way.
func (m *Manager) removeStaleTemps() {
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !isTemp(e.Name()) || e.IsDir() {
			continue
		}
		if w, ok := tempWriter(e.Name()); ok && w.gone() {
			os.Remove(filepath.Join(m.dir, e.Name()))
		}
	}
}

// Skipped is a checkpoint file that Latest passed over, with the reason.
type Skipped struct {
	Path string
	Err  error
}

// Found is the result of Latest.
type Found struct {
	Path       string
	Checkpoint *Checkpoint
	// Skipped lists newer files that failed to load, newest first.
	Skipped []Skipped
}

// Latest loads the newest checkpoint that is valid, skipping (and reporting
// in Found.Skipped) newer ones that are damaged: corrupt, truncated, or not
// a checkpoint goddp can read (errors wrapping ErrCorrupt or
// ErrUnsupported). With no valid checkpoint it returns an error wrapping
// ErrNotFound (and the reasons).
//
// A file that cannot be read at all (permission denied, an I/O error, a
// stale NFS handle) is not damage: it may well hold the newest training
// state, readable again once the fault is fixed. Latest then stops with an
// error naming the file (wrapping the system's error, never ErrNotFound)
// instead of falling back to an older checkpoint, which would roll training
// back and, through pruning, cost older checkpoints.
func (m *Manager) Latest() (Found, error) {
	f, _, err := m.latest()
	return f, err
}

// latestBytes returns the newest valid checkpoint's raw bytes (for
// broadcast); see Latest.
func (m *Manager) latestBytes() ([]byte, string, error) {
	f, b, err := m.latest()
	return b, f.Path, err
}

func (m *Manager) latest() (Found, []byte, error) {
	var f Found
	ls, err := m.list()
	if err != nil {
		return f, nil, err
	}
	for _, l := range ls {
		b, err := os.ReadFile(l.path)
		if err != nil {
			return Found{Skipped: f.Skipped}, nil, fmt.Errorf("checkpoint: cannot read %s, so no older checkpoint "+
				"is used in its place (nothing was skipped, renamed or deleted): %w", l.path, err)
		}
		c, err := Decode(b, l.path)
		if err == nil {
			f.Path, f.Checkpoint = l.path, c
			return f, b, nil
		}
		if !damaged(err) {
			return Found{Skipped: f.Skipped}, nil, err
		}
		f.Skipped = append(f.Skipped, Skipped{Path: l.path, Err: err})
	}
	if len(f.Skipped) == 0 {
		return f, nil, fmt.Errorf("%w in %s", ErrNotFound, m.dir)
	}
	errs := make([]error, len(f.Skipped))
	for i, s := range f.Skipped {
		errs[i] = s.Err
	}
	return f, nil, fmt.Errorf("%w in %s (%d damaged): %w", ErrNotFound, m.dir, len(f.Skipped), errors.Join(errs...))
}

// damaged reports whether err says a file's contents are unusable (as
// opposed to the file being unreadable): only such a file may be passed
// over in favour of an older checkpoint.
func damaged(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported)
}
