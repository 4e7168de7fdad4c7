package autograd

// Mean returns the mean of a over axes (nil means all; negative axes count
// from the end), keeping the reduced dimensions as size 1 when keepDim is set.
func Mean(a *Variable, axes []int, keepDim bool) *Variable {
	y, kshape := reduceAxes("Mean", a.Value, axes, keepDim, true)
	count := 1
	for i, d := range a.Value.Shape() {
		if kshape[i] != d {
			count *= d
		}
	}
	if a.Value.Numel() == 0 {
		count = 0
	}
	return FromOp(y, &sumOp{inputs: ins(a), kshape: kshape, scale: 1 / float64(count), name: "Mean"})
}
