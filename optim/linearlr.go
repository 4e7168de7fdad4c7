package optim

import "fmt"

// LinearLR scales each group's learning rate by a factor that moves linearly
// from startFactor to endFactor over totalIters steps and then stays at
// endFactor (torch.optim.lr_scheduler.LinearLR, recursive form).
type LinearLR struct {
	*schedule
	start, end float64
	total      int
}

// NewLinearLR attaches a LinearLR to opt and performs its initial step.
// startFactor must be in (0, 1], endFactor in [0, 1], totalIters >= 1.
func NewLinearLR(opt Optimizer, startFactor, endFactor float64, totalIters int) (*LinearLR, error) {
	if err := checkLinear(startFactor, endFactor, totalIters); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s := &LinearLR{start: startFactor, end: endFactor, total: totalIters}
	s.schedule = newSchedule(opt, s)
	return s, nil
}

// NewLinearWarmup ramps the learning rate linearly from startFactor*lr to lr
// over warmupIters steps, then leaves it alone. It is exactly torch's
// LinearLR(optimizer, start_factor=startFactor, end_factor=1.0,
// total_iters=warmupIters), and can be followed by another scheduler once the
// warmup is over.
func NewLinearWarmup(opt Optimizer, startFactor float64, warmupIters int) (*LinearLR, error) {
	return NewLinearLR(opt, startFactor, 1, warmupIters)
}

func checkLinear(start, end float64, total int) error {
	switch {
	case !(start > 0 && start <= 1):
		return fmt.Errorf("LinearLR start factor %v outside (0, 1]", start)
	case !(end >= 0 && end <= 1):
		return fmt.Errorf("LinearLR end factor %v outside [0, 1]", end)
	case total < 1:
		return fmt.Errorf("LinearLR total iters %d < 1", total)
	}
	return nil
}

func (s *LinearLR) kind() string { return "LinearLR" }

func (s *LinearLR) lr(sc *schedule, cur, _ float64) float64 {
	e := sc.lastEpoch
	switch {
	case e == 0:
		return cur * s.start
	case e > s.total:
		return cur
	}
	return cur * (1 + (s.end-s.start)/(float64(s.total)*s.start+float64(e-1)*(s.end-s.start)))
}

func (s *LinearLR) save(sd *StateDict) {
	sd.Scalars["start_factor"] = s.start
	sd.Scalars["end_factor"] = s.end
	sd.Scalars["total_iters"] = float64(s.total)
}

func (s *LinearLR) load(sd *StateDict) error {
	var v [3]float64
	for i, k := range []string{"start_factor", "end_factor", "total_iters"} {
		x, err := sd.scalar(k)
		if err != nil {
			return err
		}
		v[i] = x
	}
	if err := checkLinear(v[0], v[1], int(v[2])); err != nil {
		return fmt.Errorf("%w: %w", ErrStateDict, err)
	}
	s.start, s.end, s.total = v[0], v[1], int(v[2])
	return nil
}
