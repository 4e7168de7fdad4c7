package optim

import (
	"fmt"
)

// Scheduler adjusts an optimizer's learning rates once per Step (per epoch
// or per iteration, as the caller decides), with torch's semantics:
// constructing a scheduler performs its initial step (last_epoch 0), and
// Step should be called after the optimizer's Step.
type Scheduler interface {
	// Step advances the schedule by one and writes the new learning rates
	// into the optimizer's groups.
	Step()
	// LastLR returns the learning rates set by the latest Step, one per group.
	LastLR() []float64
	// LastEpoch is torch's last_epoch: 0 after construction, +1 per Step.
	LastEpoch() int
	StateDict() *StateDict
	LoadStateDict(sd *StateDict) error
}

// lrRule computes the learning rate of group g at s.lastEpoch from the
// group's current lr (torch's recursive get_lr form, which composes with
// other schedulers and manual changes) and its base lr.
type lrRule interface {
	lr(s *schedule, cur, base float64) float64
	kind() string
	save(sd *StateDict)
	load(sd *StateDict) error
}

// schedule is the state every scheduler shares (torch's _LRScheduler).
type schedule struct {
	opt       Optimizer
	rule      lrRule
	baseLRs   []float64
	lastLR    []float64
	lastEpoch int
	stepCount int
}

func newSchedule(opt Optimizer, rule lrRule) *schedule {
	s := &schedule{opt: opt, rule: rule, lastEpoch: -1}
	for _, g := range opt.ParamGroups() {
		if g.InitialLR == 0 {
			g.InitialLR = g.LR
		}
		s.baseLRs = append(s.baseLRs, g.InitialLR)
	}
	s.Step()
	return s
}

// Step implements Scheduler.
func (s *schedule) Step() {
	s.stepCount++
	s.lastEpoch++
	gs := s.opt.ParamGroups()
	if len(s.lastLR) != len(gs) {
		s.lastLR = make([]float64, len(gs))
	}
	// Compute every value before writing any, as torch does.
	next := s.lastLR
	for i, g := range gs {
		base := g.LR
		if i < len(s.baseLRs) {
			base = s.baseLRs[i]
		}
		next[i] = s.rule.lr(s, g.LR, base)
	}
	for i, g := range gs {
		g.LR = next[i]
	}
}

// LastLR implements Scheduler. The slice is reused by the next Step.
func (s *schedule) LastLR() []float64 { return s.lastLR }

// LastEpoch implements Scheduler.
func (s *schedule) LastEpoch() int { return s.lastEpoch }

// StateDict implements Scheduler.
func (s *schedule) StateDict() *StateDict {
	sd := NewStateDict(s.rule.kind())
	sd.Scalars["last_epoch"] = float64(s.lastEpoch)
	sd.Scalars["step_count"] = float64(s.stepCount)
	sd.Scalars["num_groups"] = float64(len(s.baseLRs))
	for i, b := range s.baseLRs {
		sd.Scalars[fmt.Sprintf("base_lrs.%d", i)] = b
	}
	for i, l := range s.lastLR {
		sd.Scalars[fmt.Sprintf("last_lr.%d", i)] = l
	}
	s.rule.save(sd)
	return sd
}

// LoadStateDict implements Scheduler. It restores the schedule's position;
// the optimizer's learning rates come from the optimizer's own state dict.
func (s *schedule) LoadStateDict(sd *StateDict) error {
	if sd == nil || sd.Kind != s.rule.kind() {
		k := "<nil>"
		if sd != nil {
			k = sd.Kind
		}
		return fmt.Errorf("%w: state dict of kind %q loaded into %s", ErrStateDict, k, s.rule.kind())
	}
	for _, k := range []string{"last_epoch", "step_count", "num_groups"} {
		if _, err := sd.scalar(k); err != nil {
			return err
		}
	}
	n := int(sd.Scalars["num_groups"])
	if n != len(s.baseLRs) {
		return fmt.Errorf("%w: %s: state dict has %d groups, scheduler has %d", ErrStateDict, s.rule.kind(), n, len(s.baseLRs))
	}
	base := make([]float64, n)
	last := make([]float64, n)
	for i := 0; i < n; i++ {
		b, err := sd.scalar(fmt.Sprintf("base_lrs.%d", i))
		if err != nil {
			return err
		}
		l, err := sd.scalar(fmt.Sprintf("last_lr.%d", i))
		if err != nil {
			return err
		}
		base[i], last[i] = b, l
	}
	if err := s.rule.load(sd); err != nil {
		return err
	}
	s.lastEpoch = int(sd.Scalars["last_epoch"])
	s.stepCount = int(sd.Scalars["step_count"])
	s.baseLRs, s.lastLR = base, last
	return nil
}
