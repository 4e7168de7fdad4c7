package autograd

import "fmt"

// Reduction selects how a loss combines its per-element values, as torch's
// reduction argument. The zero value is ReductionMean, torch's default.
type Reduction int

const (
	ReductionMean Reduction = iota // average over elements (scalar output)
	ReductionSum                   // sum over elements (scalar output)
	ReductionNone                  // keep per-element losses
)

func (r Reduction) String() string {
	switch r {
	case ReductionMean:
		return "mean"
	case ReductionSum:
		return "sum"
	case ReductionNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

func (r Reduction) check(op string) {
	if r < ReductionMean || r > ReductionNone {
		panic(fmt.Sprintf("autograd: %s: unknown reduction %d", op, int(r)))
	}
}
