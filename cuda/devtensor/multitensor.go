package devtensor

import (
	"fmt"
	"slices"
	"sync"

	"github.com/goddp/goddp/tensor"
)

// The multi-tensor entries (tensor.Kernels' AdamMulti, SGDMulti,
// SumSquaresMulti, ScaleByMulti): one launch of kernels.cu's
// multi_tensor_* kernels over every tensor of a list, as torch's
// multi_tensor_apply, instead of a launch per tensor (GPT-2 124M has 148
// parameters, so an AdamW step was 148 launches and clip_grad_norm_ 298).
// The kernels read the tensors' addresses and sizes from a table in
// device memory (its layout is in kernels.cu); the table is built and
// uploaded the first time a list is seen and reused while the same
// addresses come back, which they do every step: parameters, gradients
// and optimizer state keep their storage. The cache is keyed by the
// addresses and sizes themselves, so a tensor that moved (a new gradient
// buffer, a reallocated state) gets a new table rather than a stale one.

// multiChunk is the elements a block takes at a time: 64 per thread of a
// 256-thread block, so that GPT-2 124M's 124M parameters are ~7,600
// blocks (many waves on a GPU's 100-odd multiprocessors, the tail a few
// percent) and a 768-element bias wastes at most one block's worth.
const multiChunk = 1 << 14

// maxMultiTables bounds the tables kept: a step uses a few (one per
// parameter group and step count, one for the gradients' norm); more mean
// lists that stopped coming back.
const maxMultiTables = 16

// multiTables is a Device's cache of tables.
type multiTables struct {
	mu     sync.Mutex
	tables []*multiTable
	key    []uint64 // the key being looked up, reused between calls
	clock  uint64
}

// multiTable is one list's table on the device.
type multiTable struct {
	key    []uint64 // nt element counts, then the lists' addresses list by list
	lists  int
	nt     int
	chunks int
	words  *tensor.Tensor // the table: key, then each tensor's first chunk, then each chunk's tensor
	part   *tensor.Tensor // SumSquaresMulti's partial sums, one per chunk; nil until used
	used   uint64
}

func (d *Device) multiTensorKernels(k *tensor.Kernels) {
	k.AdamMulti = func(ws, gs, ms, vs, vmaxs []*tensor.Tensor, h tensor.AdamHyper) {
		if vmaxs != nil || h.Maximize {
			panic(fmt.Sprintf("devtensor: multi-tensor adam: %s", tensor.NoKernel("AMSGrad or maximize", d)))
		}
		d.multiLaunch("multi-tensor adam", "multi_tensor_adam_f32", [][]*tensor.Tensor{ws, gs, ms, vs},
			// The per-tensor entry's conversions (tensor.AdamStep on a device),
			// so that the float32 constants, and the results, are the same.
			f32(float32(h.LR)), f32(float32(h.Beta1)), f32(float32(h.Beta2)), f32(float32(h.Eps)),
			f32(float32(h.WeightDecay)), flag(h.Decoupled), f32(float32(h.StepSize)), f32(float32(1/h.BC2Sqrt)))
	}
	k.SGDMulti = func(ws, gs, bufs []*tensor.Tensor, h tensor.SGDHyper) {
		if bufs == nil {
			// tensor.SGDStep's two axpys on a device: w += -lr*wd*w, w += ∓lr*g.
			sign := 1.0
			if h.Maximize {
				sign = -1
			}
			d.multiLaunch("multi-tensor sgd", "multi_tensor_sgd_f32", [][]*tensor.Tensor{ws, gs},
				f32(float32(-h.LR*h.WeightDecay)), f32(float32(-h.LR*sign)), flag(h.WeightDecay != 0))
			return
		}
		if h.Maximize {
			panic(fmt.Sprintf("devtensor: multi-tensor sgd: %s", tensor.NoKernel("SGD with momentum and maximize", d)))
		}
		d.multiLaunch("multi-tensor sgd", "multi_tensor_sgd_momentum_f32", [][]*tensor.Tensor{ws, gs, bufs},
			f32(float32(h.LR)), f32(float32(h.Momentum)), f32(float32(h.Dampening)), f32(float32(h.WeightDecay)),
			flag(h.Nesterov), flag(h.First))
	}
	k.SumSquaresMulti = func(out *tensor.Tensor, xs []*tensor.Tensor) {
		const op = "multi-tensor sum of squares"
		if out.Numel() != 1 {
			panic(fmt.Sprintf("devtensor: %s into a tensor of shape %v", op, out.Shape()))
		}
		optr := d.ptr(op, out)
		d.multi.mu.Lock()
		defer d.multi.mu.Unlock()
		t := d.table(op, xs)
		if t.chunks == 0 {
			d.launch("fill_f32", 1, optr, f32(0), i64(1))
			return
		}
		if t.part == nil {
			t.part = tensor.MustEmptyOn(d, t.chunks) // the first stage writes every chunk's sum
		}
		part := d.ptr(op, t.part)
		d.launch("multi_tensor_sum_squares_f32", min(t.chunks, maxGrid), part, d.ptr(op, t.words), i64(t.nt), i64(t.chunks), i64(multiChunk))
		d.launch("multi_tensor_sum_f32", 1, optr, part, i64(t.chunks))
	}
	k.ScaleByMulti = func(xs []*tensor.Tensor, coef *tensor.Tensor) {
		if coef.Numel() != 1 {
			panic(fmt.Sprintf("devtensor: multi-tensor scale by a coefficient of shape %v", coef.Shape()))
		}
		d.multiLaunch("multi-tensor scale by", "multi_tensor_scale_by_f32", [][]*tensor.Tensor{xs}, d.ptr("multi-tensor scale by", coef))
	}
}

// multiLaunch launches kernel over the table of lists with the arguments
// (table, nt, nchunks, chunk, args...).
func (d *Device) multiLaunch(op, kernel string, lists [][]*tensor.Tensor, args ...uint64) {
	d.multi.mu.Lock()
	defer d.multi.mu.Unlock()
	t := d.table(op, lists...)
	if t.chunks == 0 {
		return
	}
	a := make([]uint64, 0, 4+len(args))
	a = append(a, d.ptr(op, t.words), i64(t.nt), i64(t.chunks), i64(multiChunk))
	d.launch(kernel, min(t.chunks, maxGrid), append(a, args...)...)
}

// table returns the table of lists (parallel lists of tensors of equal
// element counts, index by index), from the cache or newly uploaded.
// d.multi.mu is held.
func (d *Device) table(op string, lists ...[]*tensor.Tensor) *multiTable {
	c := &d.multi
	nt := len(lists[0])
	key := c.key[:0]
	for i, x := range lists[0] {
		n := x.Numel()
		for _, l := range lists[1:] {
			if len(l) != nt || l[i].Numel() != n {
				panic(fmt.Sprintf("devtensor: %s: tensor %d's operands differ in size", op, i))
			}
		}
		key = append(key, uint64(n))
	}
	for _, l := range lists {
		for _, x := range l {
			key = append(key, d.ptr(op, x))
		}
	}
	c.key = key
	c.clock++
	for _, t := range c.tables {
		if t.lists == len(lists) && slices.Equal(t.key, key) {
			t.used = c.clock
			return t
		}
	}
	t := &multiTable{key: slices.Clone(key), lists: len(lists), nt: nt, used: c.clock}
	words := slices.Clone(key)
	first := len(words)
	words = append(words, make([]uint64, nt)...)
	for i := range nt {
		words[first+i] = uint64(t.chunks)
		t.chunks += (int(key[i]) + multiChunk - 1) / multiChunk
	}
	for i := range nt {
		for range (int(key[i]) + multiChunk - 1) / multiChunk {
			words = append(words, uint64(i))
		}
	}
	t.words = tensor.MustEmptyOn(d, max(2*len(words), 1)) // the upload writes it whole
	m, off := d.mem(op, t.words)
	d.l.CopyHtoD(m, off, hostBytes(u64s(words)))
	if len(c.tables) == maxMultiTables {
		// Drop the least recently used; its blocks go back to the cache
		// after the work queued on them.
		lru := 0
		for i, x := range c.tables {
			if x.used < c.tables[lru].used {
				lru = i
			}
		}
		old := c.tables[lru]
		tensor.ReleaseScratch(old.words)
		if old.part != nil {
			tensor.ReleaseScratch(old.part)
		}
		c.tables = slices.Delete(c.tables, lru, lru+1)
	}
	c.tables = append(c.tables, t)
	return t
}

// u64s views table words as the int64s kernels.cu reads.
func u64s(w []uint64) []int64 {
	out := make([]int64, len(w))
	for i, v := range w {
		out[i] = int64(v)
	}
	return out
}
