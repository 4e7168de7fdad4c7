package autograd

import "testing"

// reductionCases are the axes/keepDim combinations Sum and Mean are checked on.
var reductionCases = []struct {
	name    string
	shape   []int
	axes    []int
	keepDim bool
}{
	{"axis1", []int{3, 4}, []int{1}, false},
	{"axis0_keep", []int{3, 4}, []int{0}, true},
	{"axes02_keep", []int{2, 3, 4}, []int{0, 2}, true},
	{"axes02", []int{2, 3, 4}, []int{2, 0}, false},
	{"neg", []int{2, 3, 4}, []int{-1}, false},
	{"all", []int{2, 3}, nil, false},
	{"all_keep", []int{2, 3}, nil, true},
	{"middle", []int{2, 3, 4}, []int{1}, false},
}

func fixtureAxes(c *fixCase) []int {
	if !c.has("axes") {
		return nil
	}
	return c.ints("axes")
}

func TestSumFixture(t *testing.T) {
	runFixture(t, "sum", plain(func(c *fixCase, in []*Variable) *Variable {
		return Sum(in[0], fixtureAxes(c), c.bool("keepdim"))
	}))
}

func TestSumGradCheck(t *testing.T) {
	for i, tc := range reductionCases {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return Sum(xs[0], tc.axes, tc.keepDim) }, randT(uint64(i), 1, 0, tc.shape...))
		})
	}
}
