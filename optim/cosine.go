package optim

import (
	"fmt"
	"math"
)

// CosineAnnealingLR anneals each group's learning rate from its base value
// to etaMin over tMax steps along half a cosine, then back up, periodically
// (torch.optim.lr_scheduler.CosineAnnealingLR, its recursive form, so the
// values match torch's step by step).
type CosineAnnealingLR struct {
	*schedule
	tMax   int
	etaMin float64
}

// NewCosineAnnealingLR attaches a CosineAnnealingLR to opt and performs its
// initial step.
func NewCosineAnnealingLR(opt Optimizer, tMax int, etaMin float64) (*CosineAnnealingLR, error) {
	if tMax <= 0 {
		return nil, fmt.Errorf("%w: CosineAnnealingLR T_max %d <= 0", ErrInvalidConfig, tMax)
	}
	s := &CosineAnnealingLR{tMax: tMax, etaMin: etaMin}
	s.schedule = newSchedule(opt, s)
	return s, nil
}

func (s *CosineAnnealingLR) kind() string { return "CosineAnnealingLR" }

func (s *CosineAnnealingLR) lr(sc *schedule, cur, base float64) float64 {
	e, tm := float64(sc.lastEpoch), float64(s.tMax)
	switch {
	case sc.lastEpoch == 0:
		return cur
	case (sc.lastEpoch-1-s.tMax)%(2*s.tMax) == 0:
		return cur + (base-s.etaMin)*(1-math.Cos(math.Pi/tm))/2
	}
	return (1+math.Cos(math.Pi*e/tm))/(1+math.Cos(math.Pi*(e-1)/tm))*(cur-s.etaMin) + s.etaMin
}

func (s *CosineAnnealingLR) save(sd *StateDict) {
	sd.Scalars["T_max"] = float64(s.tMax)
	sd.Scalars["eta_min"] = s.etaMin
}

func (s *CosineAnnealingLR) load(sd *StateDict) error {
	tm, err := sd.scalar("T_max")
	if err != nil {
		return err
	}
	em, err := sd.scalar("eta_min")
	if err != nil {
		return err
	}
	if int(tm) <= 0 {
		return fmt.Errorf("%w: CosineAnnealingLR T_max %d <= 0", ErrStateDict, int(tm))
	}
	s.tMax, s.etaMin = int(tm), em
	return nil
}
