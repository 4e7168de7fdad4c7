package ddp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// stateEntry is one parameter or buffer of the model, as compared across
// ranks and broadcast from rank 0.
type stateEntry struct {
	name   string
	kind   string // "parameter" or "buffer"
	t      *tensor.Tensor
	trains bool
}

func modelState(m nn.Module) []stateEntry {
	var out []stateEntry
	for _, np := range m.NamedParameters() {
		out = append(out, stateEntry{name: np.Name, kind: "parameter", t: np.Param.Value, trains: np.Param.RequiresGrad()})
	}
	for _, nb := range m.NamedBuffers() {
		out = append(out, stateEntry{name: nb.Name, kind: "buffer", t: nb.Buffer})
	}
	return out
}

// signature encodes each entry as [kind, requiresGrad, dtype, ndim, dims...].
// Names are not compared (as in torch): only what the collectives depend on.
func signature(es []stateEntry) []int64 {
	var sig []int64
	for _, e := range es {
		k := int64(0)
		if e.kind == "buffer" {
			k = 1
		}
		rg := int64(0)
		if e.trains {
			rg = 1
		}
		sig = append(sig, k, rg, int64(e.t.DType()), int64(e.t.Dim()))
		for _, d := range e.t.Shape() {
			sig = append(sig, int64(d))
		}
	}
	return sig
}

// decodeSignature splits a signature into its entries (nil where malformed).
func decodeSignature(sig []int64) [][]int64 {
	var out [][]int64
	for i := 0; i < len(sig); {
		if i+4 > len(sig) {
			return out
		}
		n := 4 + int(sig[i+3])
		if sig[i+3] < 0 || i+n > len(sig) {
			return out
		}
		out = append(out, sig[i:i+n])
		i += n
	}
	return out
}

func describeEntry(e []int64) string {
	if e == nil {
		return "nothing"
	}
	kind := "parameter"
	if e[0] == 1 {
		kind = "buffer"
	}
	dims := make([]string, 0, len(e)-4)
	for _, d := range e[4:] {
		dims = append(dims, fmt.Sprint(d))
	}
	rg := ""
	if e[0] == 0 && e[1] == 0 {
		rg = " (requires grad off)"
	}
	return fmt.Sprintf("%s [%s] %v%s", kind, strings.Join(dims, " "), tensor.DType(e[2]), rg)
}

func wait(ctx context.Context, w backend.Work, what string) error {
	if err := w.Wait(ctx); err != nil {
		return fmt.Errorf("ddp: %s: %w", what, err)
	}
	return nil
}

// verifyModel checks that every rank has the same parameters and buffers
// (count, shape, dtype, requires-grad): rank 0's signature is broadcast, each
// rank compares, and an all-reduce of per-rank "first mismatching entry"
// slots tells every rank who disagrees, so all ranks fail together.
func verifyModel(ctx context.Context, pg backend.ProcessGroup, es []stateEntry) error {
	sig := signature(es)
	n := []int64{int64(len(sig))}
	if err := wait(ctx, pg.Broadcast(backend.Int64s(n), 0), "broadcasting the model signature length"); err != nil {
		return err
	}
	ref := make([]int64, n[0])
	if pg.Rank() == 0 {
		copy(ref, sig)
	}
	if len(ref) > 0 {
		if err := wait(ctx, pg.Broadcast(backend.Int64s(ref), 0), "broadcasting the model signature"); err != nil {
			return err
		}
	}
	mine := decodeSignature(sig)
	theirs := decodeSignature(ref)
	first := -1
	for i := 0; i < max(len(mine), len(theirs)); i++ {
		if i >= len(mine) || i >= len(theirs) || !slices.Equal(mine[i], theirs[i]) {
			first = i
			break
		}
	}
	slots := make([]float64, pg.Size())
	slots[pg.Rank()] = float64(first + 1)
	if err := wait(ctx, pg.AllReduce(backend.Float64s(slots), backend.Sum), "comparing model signatures"); err != nil {
		return err
	}
	var bad []int
	var where []string
	for r, s := range slots {
		if s != 0 {
			bad = append(bad, r)
			where = append(where, fmt.Sprintf("rank %d at entry #%d", r, int(s)-1))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	entryName := func(i int) string {
		if i < len(es) {
			return fmt.Sprintf("%s %q", es[i].kind, es[i].name)
		}
		return fmt.Sprintf("entry #%d", i)
	}
	get := func(es [][]int64, i int) []int64 {
		if i < len(es) {
			return es[i]
		}
		return nil
	}
	if first >= 0 {
		return fmt.Errorf("%w: %s (#%d) is %s on rank 0 but %s on rank %d; ranks disagreeing with rank 0: %v (%s); "+
			"model has %d parameters+buffers here, %d on rank 0. Every rank must build the same model before ddp.Wrap",
			ErrParamMismatch, entryName(first), first, describeEntry(get(theirs, first)), describeEntry(get(mine, first)), pg.Rank(),
			bad, strings.Join(where, ", "), len(mine), len(theirs))
	}
	i := int(slots[bad[0]]) - 1
	return fmt.Errorf("%w: ranks disagreeing with rank 0: %v (%s); the first is at %s (#%d), which is %s on rank %d. Every rank must build the same model before ddp.Wrap",
		ErrParamMismatch, bad, strings.Join(where, ", "), entryName(i), i, describeEntry(get(mine, i)), pg.Rank())
}

// broadcastState copies root's values of the given tensors to every rank,
// coalescing them per dtype into flat buffers of at most chunkBytes (torch's
// _sync_module_states / _broadcast_coalesced).
func broadcastState(ctx context.Context, pg backend.ProcessGroup, ts []*tensor.Tensor, root int, what string) error {
	if pg.Size() == 1 || len(ts) == 0 {
		return nil
	}
	const chunkBytes = 64 << 20
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Int64} {
		var group []*tensor.Tensor
		size := 0
		flush := func() error {
			if len(group) == 0 {
				return nil
			}
			err := broadcastFlat(ctx, pg, group, dt, root, what)
			group, size = group[:0], 0
			return err
		}
		for _, t := range ts {
			if t.DType() != dt {
				continue
			}
			if !t.IsContiguous() {
				return fmt.Errorf("%w: %s: a tensor of shape %v is not contiguous", ErrInvalidOption, what, t.Shape())
			}
			group = append(group, t)
			size += t.Numel() * dt.Size()
			if size >= chunkBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

func broadcastFlat(ctx context.Context, pg backend.ProcessGroup, ts []*tensor.Tensor, dt tensor.DType, root int, what string) error {
	n := 0
	for _, t := range ts {
		n += t.Numel()
	}
	if dt == tensor.Int64 { // counters: BatchNorm's num_batches_tracked
		flat := make([]int64, 0, n)
		for _, t := range ts {
			flat = append(flat, t.I64()...)
		}
		if err := wait(ctx, pg.Broadcast(backend.Int64s(flat), root), what); err != nil {
			return err
		}
		for _, t := range ts {
			flat = flat[copy(t.I64(), flat):]
		}
		return nil
	}
	if dt == tensor.Float64 {
		flat := make([]float64, 0, n)
		for _, t := range ts {
			flat = append(flat, t.F64()...)
		}
		if err := wait(ctx, pg.Broadcast(backend.Float64s(flat), root), what); err != nil {
			return err
		}
		for _, t := range ts {
			flat = flat[copy(t.F64(), flat):]
		}
		return nil
	}
	flat := make([]float32, 0, n)
	for _, t := range ts {
		if !t.IsCPU() {
			// Staged through the host (a device model's parameters).
			h, err := t.To(tensor.CPU())
			if err != nil {
				return fmt.Errorf("ddp: %s: %w", what, err)
			}
			flat = append(flat, h.F32()...)
			continue
		}
		flat = append(flat, t.F32()...)
	}
	if err := wait(ctx, pg.Broadcast(backend.Float32s(flat), root), what); err != nil {
		return err
	}
	for _, t := range ts {
		if !t.IsCPU() {
			n := t.Numel()
			if err := tensor.Copy(t, tensor.FromF32(flat[:n], t.Shape()...)); err != nil {
				return fmt.Errorf("ddp: %s: %w", what, err)
			}
			flat = flat[n:]
			continue
		}
		flat = flat[copy(t.F32(), flat):]
	}
	return nil
}
