package optim

import "fmt"

// StepLR multiplies each group's learning rate by gamma every stepSize
// steps (torch.optim.lr_scheduler.StepLR).
type StepLR struct {
	*schedule
	stepSize int
	gamma    float64
}

// NewStepLR attaches a StepLR to opt and performs its initial step.
func NewStepLR(opt Optimizer, stepSize int, gamma float64) (*StepLR, error) {
	if stepSize <= 0 {
		return nil, fmt.Errorf("%w: StepLR step size %d <= 0", ErrInvalidConfig, stepSize)
	}
	s := &StepLR{stepSize: stepSize, gamma: gamma}
	s.schedule = newSchedule(opt, s)
	return s, nil
}

func (s *StepLR) kind() string { return "StepLR" }

func (s *StepLR) lr(sc *schedule, cur, _ float64) float64 {
	if sc.lastEpoch == 0 || sc.lastEpoch%s.stepSize != 0 {
		return cur
	}
	return cur * s.gamma
}

func (s *StepLR) save(sd *StateDict) {
	sd.Scalars["step_size"] = float64(s.stepSize)
	sd.Scalars["gamma"] = s.gamma
}

func (s *StepLR) load(sd *StateDict) error {
	ss, err := sd.scalar("step_size")
	if err != nil {
		return err
	}
	g, err := sd.scalar("gamma")
	if err != nil {
		return err
	}
	if int(ss) <= 0 {
		return fmt.Errorf("%w: StepLR step size %d <= 0", ErrStateDict, int(ss))
	}
	s.stepSize, s.gamma = int(ss), g
	return nil
}
