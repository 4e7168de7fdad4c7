package optim

import (
	"fmt"
	"math"
)

// WarmupCosineLR is nanoGPT's learning-rate schedule (train.py's get_lr),
// as a Scheduler: at step it (LastEpoch, counting optimizer steps from 0)
// each group's learning rate is
//
//	it < warmup:           base * (it+1) / (warmup+1)
//	warmup <= it < decay:  minLR + (base-minLR) * (1 + cos(pi * (it-warmup)/(decay-warmup))) / 2
//	it >= decay:           minLR
//
// base being the group's initial learning rate (the peak) and minLR the
// same absolute floor for every group, as eta_min is in torch's
// CosineAnnealingLR. At it == decay the cosine is already at minLR, so the
// third line only says what nanoGPT's "it > lr_decay_iters" says, and a
// decay step count not above the warm-up (an empty cosine) goes straight
// to minLR instead of dividing by zero. The value is a closed form of the
// step, not torch's recursive form: restoring LastEpoch restores the
// schedule, whatever the optimizer's learning rate was.
//
// As every Scheduler, it sets step 0's rate when built, and Step, called
// after each optimizer step, sets the next one.
type WarmupCosineLR struct {
	*schedule
	warmup, decay int
	minLR         float64
}

// NewWarmupCosineLR attaches nanoGPT's warm-up and cosine decay to opt:
// warmupSteps of linear warm-up, the cosine reaching minLR at decaySteps
// (nanoGPT's lr_decay_iters, counted from step 0, warm-up included).
func NewWarmupCosineLR(opt Optimizer, warmupSteps, decaySteps int, minLR float64) (*WarmupCosineLR, error) {
	if err := checkWarmupCosine(warmupSteps, decaySteps, minLR); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s := &WarmupCosineLR{warmup: warmupSteps, decay: decaySteps, minLR: minLR}
	s.schedule = newSchedule(opt, s)
	return s, nil
}

func checkWarmupCosine(warmup, decay int, minLR float64) error {
	switch {
	case warmup < 0:
		return fmt.Errorf("WarmupCosineLR warm-up steps %d < 0", warmup)
	case decay < 0:
		return fmt.Errorf("WarmupCosineLR decay steps %d < 0", decay)
	case !(minLR >= 0):
		return fmt.Errorf("WarmupCosineLR min lr %v < 0", minLR)
	}
	return nil
}

// WarmupCosine is the rate WarmupCosineLR gives a group of peak lr at
// step it (nanoGPT's get_lr(it)).
func WarmupCosine(it, warmupSteps, decaySteps int, lr, minLR float64) float64 {
	switch {
	case it < warmupSteps:
		return lr * float64(it+1) / float64(warmupSteps+1)
	case it >= decaySteps:
		return minLR
	}
	ratio := float64(it-warmupSteps) / float64(decaySteps-warmupSteps)
	return minLR + 0.5*(1+math.Cos(math.Pi*ratio))*(lr-minLR)
}

func (s *WarmupCosineLR) kind() string { return "WarmupCosineLR" }

func (s *WarmupCosineLR) lr(sc *schedule, _, base float64) float64 {
	return WarmupCosine(sc.lastEpoch, s.warmup, s.decay, base, s.minLR)
}

func (s *WarmupCosineLR) save(sd *StateDict) {
	sd.Scalars["warmup_steps"] = float64(s.warmup)
	sd.Scalars["decay_steps"] = float64(s.decay)
	sd.Scalars["min_lr"] = s.minLR
}

func (s *WarmupCosineLR) load(sd *StateDict) error {
	var v [3]float64
	for i, k := range []string{"warmup_steps", "decay_steps", "min_lr"} {
		x, err := sd.scalar(k)
		if err != nil {
			return err
		}
		v[i] = x
	}
	if err := checkWarmupCosine(int(v[0]), int(v[1]), v[2]); err != nil {
		return fmt.Errorf("%w: %w", ErrStateDict, err)
	}
	s.warmup, s.decay, s.minLR = int(v[0]), int(v[1]), v[2]
	return nil
}
