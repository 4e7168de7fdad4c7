package optim

import (
	"errors"
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Foreach chooses how Adam, AdamW and SGD update a group's parameters:
// one multi-tensor update over all of them (torch's foreach=True and
// fused=True, multi_tensor_apply on CUDA), or one update per parameter
// (foreach=False). On a GPU the multi-tensor update is one kernel launch
// for the whole group instead of one per parameter; its arithmetic is the
// per-parameter update's element by element, so the results are the same
// bit for bit. On the host both run the same per-parameter code.
type Foreach int8

const (
	// ForeachAuto, the default, is torch's foreach=None on CUDA: the
	// multi-tensor update where the parameters' device has one (the host,
	// goddp/cuda, sim) and the options are ones it takes (not AMSGrad or
	// maximize on a device), else one update per parameter.
	ForeachAuto Foreach = iota
	// ForeachOn requires the multi-tensor update: Step returns an error
	// wrapping ErrInvalidConfig where there is none (torch's fused=True on
	// a device without the kernel).
	ForeachOn
	// ForeachOff updates one parameter at a time (torch's foreach=False).
	ForeachOff
)

func (f Foreach) String() string {
	switch f {
	case ForeachAuto:
		return "auto"
	case ForeachOn:
		return "on"
	case ForeachOff:
		return "off"
	}
	return fmt.Sprintf("Foreach(%d)", int8(f))
}

func (f Foreach) validate(kind string) error {
	if f < ForeachAuto || f > ForeachOff {
		return fmt.Errorf("%w: %s foreach %v", ErrInvalidConfig, kind, f)
	}
	return nil
}

// multiFallback reports whether a multi-tensor update's error leaves the
// batch to the per-parameter path: in ForeachAuto, an update the device
// lacks or parameters on several devices (nothing was changed then). Any
// other error is returned as stepErr names it, the batch's parameters
// being first..last in the flat order.
func multiFallback(mode Foreach, err error, kind string, first, last int) (bool, error) {
	if err == nil {
		return false, nil
	}
	noKernel := errors.Is(err, tensor.ErrNoKernel)
	if mode == ForeachAuto && (noKernel || errors.Is(err, tensor.ErrMixedDevices)) {
		return true, nil
	}
	if noKernel || errors.Is(err, tensor.ErrMixedDevices) {
		return false, fmt.Errorf("%w: %s foreach on: parameters %d..%d: %w", ErrInvalidConfig, kind, first, last, err)
	}
	return false, fmt.Errorf("%w: parameters %d..%d: %w", ErrBadGrad, first, last, err)
}

// multiLists are the lists a multi-tensor update is given, kept between
// steps so that a step allocates none.
type multiLists struct {
	ws, gs, ms, vs, vmaxs []*tensor.Tensor
	idx                   []int     // the parameters' flat indices
	steps                 []float64 // Adam's step counts in a group
}

// clear empties the lists, dropping their references to the tensors (idx
// is kept for the caller).
func (m *multiLists) clear() {
	for _, l := range []*[]*tensor.Tensor{&m.ws, &m.gs, &m.ms, &m.vs, &m.vmaxs} {
		clear(*l)
		*l = (*l)[:0]
	}
}
