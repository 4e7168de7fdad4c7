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
// one that loads.
type Manager struct {
	dir  string
	keep int
}

// ManagerOption configures NewManager.
type ManagerOption func(*Manager)

// Keep sets how many checkpoints to keep (default 3; 0 keeps all).
func Keep(k int) ManagerOption { return func(m *Manager) { m.keep = k } }

// NewManager uses dir, creating it if needed.
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
// deletes all but the newest Keep checkpoints and any temporary files left
// by interrupted saves. It returns the new file's path.
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
	m.removeTemps()
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
// (epoch, step) that load. Invalid ones do not count: Latest skips them.
func (m *Manager) newerValid(ls []listed, epoch, step int) []string {
	var out []string
	for _, l := range ls {
		if l.epoch < epoch || (l.epoch == epoch && l.step <= step) {
			break
		}
		if _, err := Load(l.path); err == nil {
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

func (m *Manager) removeTemps() {
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if isTemp(e.Name()) {
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
// in Found.Skipped) newer ones that are corrupt or truncated. With no valid
// checkpoint it returns an error wrapping ErrNotFound (and the reasons).
func (m *Manager) Latest() (Found, error) {
	var f Found
	ls, err := m.list()
	if err != nil {
		return f, err
	}
	for _, l := range ls {
		b, err := os.ReadFile(l.path)
		if err == nil {
			var c *Checkpoint
			if c, err = Decode(b, l.path); err == nil {
				f.Path, f.Checkpoint = l.path, c
				return f, nil
			}
		}
		f.Skipped = append(f.Skipped, Skipped{Path: l.path, Err: err})
	}
	if len(f.Skipped) == 0 {
		return f, fmt.Errorf("%w in %s", ErrNotFound, m.dir)
	}
	errs := make([]error, len(f.Skipped))
	for i, s := range f.Skipped {
		errs[i] = s.Err
	}
	return f, fmt.Errorf("%w in %s (%d unreadable): %w", ErrNotFound, m.dir, len(f.Skipped), errors.Join(errs...))
}

// latestBytes returns the newest valid checkpoint's raw bytes (for broadcast).
func (m *Manager) latestBytes() ([]byte, string, error) {
	ls, err := m.list()
	if err != nil {
		return nil, "", err
	}
	var errs []error
	for _, l := range ls {
		b, err := os.ReadFile(l.path)
		if err == nil {
			if _, err = Decode(b, l.path); err == nil {
				return b, l.path, nil
			}
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, "", fmt.Errorf("%w in %s", ErrNotFound, m.dir)
	}
	return nil, "", fmt.Errorf("%w in %s (%d unreadable): %w", ErrNotFound, m.dir, len(errs), errors.Join(errs...))
}
