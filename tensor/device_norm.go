package tensor

import "fmt"

// Batch normalization and where / masked_fill on every device (the CPU's
// table included).

// BatchNormState is what BatchNorm's forward keeps for its
// backward: the normalized input, coef [2c] = (mean, rstd) and the
// statistics stats [2c+1] (nil in evaluation), whose last element is the
// count of values per channel (across every replica for SyncBatchNorm).
type BatchNormState struct {
	Xhat, Coef, Stats *Tensor
	N, C, L           int
	Training          bool
}

// BatchNormForward normalizes x [n, c, l] per channel, as torch's
// batch_norm, by the BatchNorm entries of x's device table (the CPU's
// included): with the batch statistics in training, updating rm and rv in
// place when given, or with rm and rv in evaluation. w, b, rm and rv ([c])
// may be nil and must be on x's device. allReduce, when non-nil
// (SyncBatchNorm in training), sums the statistics tensor [Σx | Σx² |
// count] across replicas in place before they are used.
func BatchNormForward(x, w, b, rm, rv *Tensor, n, c, l int, training bool, momentum, eps float64,
	allReduce func(stats *Tensor) error) (*Tensor, *BatchNormState, error) {
	k := table("BatchNorm", x, w, b, rm, rv)
	need(k.BatchNormStats != nil && k.BatchNormFinalize != nil && k.BatchNormApply != nil, "BatchNorm", x)
	for _, t := range []*Tensor{rm, rv} {
		if t != nil && !t.IsContiguous() {
			return nil, nil, fmt.Errorf("%w: BatchNorm's running statistics of shape %s must be contiguous on %v", ErrDevice, sh(t.shape), x.Device())
		}
	}
	xc := x.Contiguous()
	// xhat and y are written whole by BatchNormApply.
	st := &BatchNormState{Xhat: EmptyAs(xc, xc.shape...), Coef: ZerosAs(xc, 2*c), N: n, C: c, L: l, Training: training}
	y := EmptyAs(xc, xc.shape...)
	if training {
		st.Stats = ZerosAs(xc, 2*c+1)
		k.BatchNormStats(st.Stats, xc, n, c, l, allReduce != nil)
		if allReduce != nil {
			if err := allReduce(st.Stats); err != nil {
				return nil, nil, err
			}
		}
	}
	k.BatchNormFinalize(st.Coef, st.Stats, rm, rv, training, allReduce != nil, momentum, eps)
	k.BatchNormApply(y, st.Xhat, xc, st.Coef, contiguousOrNil(w), contiguousOrNil(b), n, c, l)
	return y, st, nil
}

// BatchNormBackward returns BatchNorm's input gradient (nil unless
// wantDX) from gy and the forward's state, and adds the weight and bias
// gradients into dw and db (each nil when not wanted). allReduce, when
// non-nil (SyncBatchNorm), sums [Σgy | Σgy·xhat] across replicas before
// the input gradient; dw and db get the local sums, as torch's.
func BatchNormBackward(gy *Tensor, st *BatchNormState, w, dw, db *Tensor, wantDX bool,
	allReduce func(sums *Tensor) error) (*Tensor, error) {
	k := table("BatchNorm backward", gy, w, dw, db)
	need(k.BatchNormBackwardReduce != nil && k.BatchNormBackwardInput != nil, "BatchNorm backward", gy)
	for _, p := range []*Tensor{dw, db} {
		if p != nil && !p.IsContiguous() {
			panic(NoKernel("BatchNorm backward into a view", p.Device()))
		}
	}
	g := gy.Contiguous()
	var sums *Tensor
	if st.Training || dw != nil || db != nil {
		sums = ZerosAs(g, 2*st.C)
		k.BatchNormBackwardReduce(sums, dw, db, g, st.Xhat, st.N, st.C, st.L)
	}
	if !wantDX {
		return nil, nil
	}
	if st.Training && allReduce != nil {
		if err := allReduce(sums); err != nil {
			return nil, err
		}
	}
	dx := EmptyAs(g, g.shape...) // written whole
	if st.Training {
		k.BatchNormBackwardInput(dx, g, st.Xhat, st.Coef, contiguousOrNil(w), sums, st.Stats, st.N, st.C, st.L)
	} else {
		k.BatchNormBackwardInput(dx, g, st.Xhat, st.Coef, contiguousOrNil(w), nil, nil, st.N, st.C, st.L)
	}
	return dx, nil
}

// Where is y = m ≠ 0 ? a : b on the operands' device, by its table's
// Where entry (the CPU's included), each broadcast to shape (the mask m
// may be on the host: it is copied to the device, in the operands'
// dtype); a nil a reads va and a nil b reads vb (masked_fill). It also
// returns the mask at shape on that device, for the gradients (MaskedGrad).
func Where(m, a, b *Tensor, va, vb float64, shape []int) (y, mask *Tensor) {
	on := a
	if on == nil {
		on = b
	}
	k := table("Where", a, b)
	need(k.Where != nil, "Where", on)
	if m.dev == nil {
		m = AsType(m, on.dtype).MustTo(on.Device())
	}
	kernelsFor("Where", m, on) // a mask on another device panics, naming both
	mask = expandTo(m, shape)
	y = EmptyAs(on, shape...) // written whole
	k.Where(y, mask, expandTo(a, shape), expandTo(b, shape), va, vb)
	return y, mask
}

// MaskedGrad is the gradient through a mask: gy where mask ≠ 0 (onTrue)
// or where it is 0 (otherwise), 0 elsewhere; mask is Where's, at gy's
// shape.
func MaskedGrad(mask, gy *Tensor, onTrue bool) *Tensor {
	var g *Tensor
	if onTrue {
		g, _ = Where(mask, gy, nil, 0, 0, gy.shape)
	} else {
		g, _ = Where(mask, nil, gy, 0, 0, gy.shape)
	}
	return g
}

// expandTo is t broadcast to shape, contiguous (nil for nil).
func expandTo(t *Tensor, shape []int) *Tensor {
	if t == nil {
		return nil
	}
	return Expand(t, shape...).Contiguous()
}
