package trainer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/optim"
)

// resume loads the newest valid checkpoint, if any, on every rank. Newer
// files that are corrupt or truncated (a disk fault, a copy cut short) are
// skipped, and rank 0 says so, naming each file and why. A file that cannot
// be read (permission, I/O error) stops the resume on every rank, naming
// it, with nothing renamed or deleted: it may hold the newest state, and
// falling back would roll training back. When the directory
// holds checkpoint files but none of them loads, every rank fails with an
// error naming them instead of silently starting over: a fresh run would
// otherwise train from scratch, and its new, lower-numbered checkpoints would
// be the ones pruned behind the unreadable files.
func (t *Trainer) resume(ctx context.Context) error {
	var listed []string
	if t.pg.Rank() == 0 {
		var err error
		if listed, err = t.ckpt.List(); err != nil {
			listed = nil // LoadLatestAndBroadcast reports the directory error
		}
	}
	c, err := checkpoint.LoadLatestAndBroadcast(ctx, t.pg, t.ckpt)
	if errors.Is(err, checkpoint.ErrNotFound) {
		// Every rank got ErrNotFound; rank 0 alone knows whether files were
		// there, so it tells the others.
		refusal := ""
		if t.pg.Rank() == 0 && len(listed) > 0 {
			refusal = err.Error()
		}
		if berr := comm.BroadcastObject(ctx, t.pg, &refusal, 0); berr != nil {
			return fmt.Errorf("trainer: resume: %w", berr)
		}
		if refusal == "" {
			return nil
		}
		if t.pg.Rank() == 0 {
			return fmt.Errorf("trainer: resume: no checkpoint in %s loads; move the unreadable files away to start fresh: %w",
				t.ckpt.Dir(), err)
		}
		letRank0ReportFirst(ctx)
		return fmt.Errorf("trainer: resume: rank 0 found no loadable checkpoint: %s", refusal)
	}
	if err != nil {
		if t.pg.Rank() != 0 && errors.Is(err, checkpoint.ErrRemote) {
			letRank0ReportFirst(ctx)
		}
		return fmt.Errorf("trainer: resume: %w", err)
	}
	if t.pg.Rank() == 0 {
		t.reportSkipped(listed, t.ckpt.Path(c.Epoch, c.Step))
	}
	if err := checkpoint.LoadStateDict(t.model.Module(), c.Model, true); err != nil {
		return fmt.Errorf("trainer: resume model: %w", err)
	}
	if c.Optimizer != nil {
		if err := t.optimizer.LoadStateDict((*optim.StateDict)(c.Optimizer)); err != nil {
			return fmt.Errorf("trainer: resume optimizer: %w", err)
		}
	}
	if err := t.resumeScaler(c); err != nil {
		return err
	}
	if err := t.resumeScheduler(c); err != nil {
		return err
	}
	t.start, t.step = c.Epoch+1, c.Step
	t.resumedFrom, t.resumedEpoch = t.ckpt.Path(c.Epoch, c.Step), c.Epoch
	if t.sampler != nil && c.Sampler != nil && c.Sampler.Position > 0 && midEpoch(*c.Sampler, t.sampler) {
		// A mid-epoch checkpoint: continue inside that epoch, at this run's
		// world size if it differs (the rest of the epoch is dealt over the
		// ranks there are now, each remaining sample once).
		if err := t.sampler.LoadStateElastic(*c.Sampler); err != nil {
			return fmt.Errorf("trainer: resume sampler: %w", err)
		}
		t.start = c.Epoch
	}
	t.logf("Resumed from epoch %d (step %d) of %s\n", c.Epoch, c.Step, t.ckpt.Path(c.Epoch, c.Step))
	return nil
}

// resumeScaler restores the GradScaler's scale and growth tracker, so the
// run continues with the scale it had instead of starting again at the
// initial one (which overflows for its first steps). A checkpoint without
// scaler state (saved without one, or before checkpoints held it) leaves the
// scaler as configured, and a scaler state with no scaler to take it is
// ignored (a float16 run resumed in float32); rank 0 says which.
func (t *Trainer) resumeScaler(c *checkpoint.Checkpoint) error {
	switch {
	case t.scaler != nil && c.GradScaler != nil:
		if err := t.scaler.LoadState(amp.State(*c.GradScaler)); err != nil {
			return fmt.Errorf("trainer: resume GradScaler: %w", err)
		}
	case t.scaler != nil:
		t.logf("Resume: the checkpoint has no GradScaler state; the loss scale starts at %g\n", t.scaler.Scale())
	case c.GradScaler != nil:
		t.logf("Resume: the checkpoint's GradScaler state (scale %g) is unused: this run has no loss scaling\n", c.GradScaler.Scale)
	}
	return nil
}

// reportSkipped names the listed files newer than loaded (the newest first,
// as Manager.List orders them), which LoadLatestAndBroadcast passed over, with
// the reason each fails to load, and renames each damaged one to
// FILE.corrupt: kept for inspection, but out of Manager's way, so later
// resumes do not skip it again and later saves do not re-read it while
// pruning. A file that fails now for another reason (it could not be read
// this time) is only reported: it may not be damaged at all.
func (t *Trainer) reportSkipped(listed []string, loaded string) {
	for _, p := range listed {
		if p == loaded {
			return
		}
		_, err := checkpoint.Load(p)
		if err == nil {
			continue
		}
		moved := ""
		if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, checkpoint.ErrUnsupported) {
			moved = "; left in place"
		} else if rerr := os.Rename(p, p+".corrupt"); rerr == nil {
			moved = "; moved to " + p + ".corrupt"
		}
		fmt.Fprintf(t.out, "Skipped checkpoint %s: %v%s\n", p, err, moved)
	}
}

// moveAside is Config.Fresh: rank 0 moves the directory's checkpoints
// (damaged ones included) into a new subdirectory named after the time,
// where Manager neither resumes from them nor prunes them, and says where
// they went. They are never deleted: a directory is locked for one job at a
// time, but it may hold another run's only copy. The other ranks wait for
// the result, so all fail together when the move does.
func (t *Trainer) moveAside(ctx context.Context) error {
	var msg, failed string
	if t.pg.Rank() == 0 {
		var err error
		if msg, err = t.moveCheckpointsAside(); err != nil {
			failed = err.Error()
		}
	}
	if err := comm.BroadcastObject(ctx, t.pg, &failed, 0); err != nil {
		return fmt.Errorf("trainer: fresh start: %w", err)
	}
	if failed != "" {
		if t.pg.Rank() != 0 {
			letRank0ReportFirst(ctx)
		}
		return fmt.Errorf("trainer: fresh start: %s", failed)
	}
	if msg != "" {
		t.logf("%s\n", msg)
	}
	return nil
}

func (t *Trainer) moveCheckpointsAside() (string, error) {
	dir := t.ckpt.Dir()
	var files []string
	for _, pat := range []string{"ckpt-e*.safetensors", "ckpt-e*.safetensors.corrupt", "best.safetensors"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return "", err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return "", nil
	}
	aside, err := makeAsideDir(dir, time.Now())
	if err != nil {
		return "", fmt.Errorf("moving the checkpoints of %s aside (nothing was moved): %w", dir, err)
	}
	for i, f := range files {
		if err := os.Rename(f, filepath.Join(aside, filepath.Base(f))); err != nil {
			return "", fmt.Errorf("moving the checkpoints of %s aside (%d of %d moved to %s): %w", dir, i, len(files), aside, err)
		}
	}
	return fmt.Sprintf("Fresh start: moved %d checkpoint files from %s to %s", len(files), dir, aside), nil
}

// makeAsideDir creates a new directory dir/previous-<UTC time> for a fresh
// start's old checkpoints. The name has a resolution of one second, so two
// -fresh runs within one second (a script that retries, a test) would meet
// the first one's directory: the second takes previous-<time>.2, .3, ...
// os.Mkdir is the arbiter, so two ranks or jobs racing never share one.
func makeAsideDir(dir string, now time.Time) (string, error) {
	base := filepath.Join(dir, "previous-"+now.UTC().Format("20060102T150405Z"))
	// 1000 names per second is far more than -fresh runs can start in one
	// second; past that something else is filling the directory.
	for i := 1; i <= 1000; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s.%d", base, i)
		}
		err := os.Mkdir(name, 0o755)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("1000 directories named %s[.N] already exist", base)
}

// midEpoch reports whether a saved sampler state stopped inside its epoch:
// at the same world size, before the end of the rank's list; at another,
// before the last index the saving ranks would have reached (with drop_last
// the tail they would have dropped does not count).
func midEpoch(st data.SamplerState, now *data.DistributedSampler) bool {
	if st.NumReplicas == now.NumReplicas() {
		return st.Position < now.Len()
	}
	end := st.DatasetLen
	if st.DropLast && st.NumReplicas > 0 {
		end = st.Base + (st.DatasetLen-st.Base)/st.NumReplicas*st.NumReplicas
	}
	return st.Consumed() < end
}
