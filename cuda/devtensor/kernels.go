package devtensor

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// kernels is the op table: each entry maps a tensor.Kernels op onto
// kernels.cu (or the launcher's SGEMM). This is the one place where an op
// gets its device path, for every device that runs kernels.cu.
func (d *Device) kernels() tensor.Kernels {
	return tensor.Kernels{
		Gemm: func(transA, transB bool, m, n, k int, alpha float32, a *tensor.Tensor, lda int,
			b *tensor.Tensor, ldb int, beta float32, c *tensor.Tensor, ldc int) {
			am, ao := d.mem("gemm", a)
			bm, bo := d.mem("gemm", b)
			cm, co := d.mem("gemm", c)
			if m == 0 || n == 0 {
				return
			}
			d.l.Sgemm(transA, transB, m, n, k, alpha, am, ao, lda, bm, bo, ldb, beta, cm, co, ldc)
		},
		GemmStridedBatched: func(transA, transB bool, m, n, k int, alpha float32, a *tensor.Tensor, lda, sa int,
			b *tensor.Tensor, ldb, sb int, beta float32, c *tensor.Tensor, ldc, sc, batch int) {
			am, ao := d.mem("batched gemm", a)
			bm, bo := d.mem("batched gemm", b)
			cm, co := d.mem("batched gemm", c)
			if m == 0 || n == 0 || batch == 0 {
				return
			}
			if bl, ok := d.l.(BatchedLauncher); ok &&
				bl.SgemmStridedBatched(transA, transB, m, n, k, alpha, am, ao, lda, sa, bm, bo, ldb, sb, beta, cm, co, ldc, sc, batch) {
				return
			}
			for i := range batch {
				d.l.Sgemm(transA, transB, m, n, k, alpha, am, ao+4*i*sa, lda, bm, bo+4*i*sb, ldb, beta, cm, co+4*i*sc, ldc)
			}
		},
		Fill: func(x *tensor.Tensor, v float32) {
			n := x.Numel()
			d.launch("fill_f32", grid(n), d.ptr("fill", x), f32(v), i64(n))
		},
		Copy: func(dst, src *tensor.Tensor) {
			n := same("copy", dst, src)
			dm, do := d.mem("copy", dst)
			sm, so := d.mem("copy", src)
			d.l.CopyDtoD(dm, do, sm, so, 4*n)
		},
		Axpy: func(y *tensor.Tensor, a float32, x *tensor.Tensor) {
			n := same("axpy", y, x)
			d.launch("axpy_f32", grid(n), d.ptr("axpy", y), d.ptr("axpy", x), i64(n), f32(a))
		},
		Scale: func(y, x *tensor.Tensor, s float32) {
			n := same("scale", y, x)
			d.launch("scale_f32", grid(n), d.ptr("scale", y), d.ptr("scale", x), i64(n), f32(s))
		},
		ScaleBy: func(x, coef *tensor.Tensor) {
			if coef.Numel() != 1 {
				panic(fmt.Sprintf("devtensor: scale by a coefficient of shape %v", coef.Shape()))
			}
			n := x.Numel()
			d.launch("scale_by_f32", grid(n), d.ptr("scale by", x), d.ptr("scale by", coef), i64(n))
		},
		Add: func(y, a, b *tensor.Tensor) {
			n := same("add", y, a, b)
			d.launch("add_f32", grid(n), d.ptr("add", y), d.ptr("add", a), d.ptr("add", b), i64(n))
		},
		AddBias: func(y, bias *tensor.Tensor) {
			rows, cols := rowsCols(y)
			if bias.Numel() != cols {
				panic(fmt.Sprintf("devtensor: add bias of %d elements to rows of %d", bias.Numel(), cols))
			}
			d.launch("add_bias_f32", grid(rows*cols), d.ptr("add bias", y), d.ptr("add bias", bias), i64(rows), i64(cols))
		},
		ReLU: func(y, x *tensor.Tensor) {
			n := same("relu", y, x)
			d.launch("relu_f32", grid(n), d.ptr("relu", y), d.ptr("relu", x), i64(n))
		},
		ReLUBackward: func(dx, dy, y *tensor.Tensor) {
			// relu_bwd_f32 masks by its input x; y > 0 exactly where x > 0.
			n := same("relu backward", dx, dy, y)
			d.launch("relu_bwd_f32", grid(n), d.ptr("relu backward", dx), d.ptr("relu backward", dy), d.ptr("relu backward", y), i64(n))
		},
		SumRows: func(out, x *tensor.Tensor) {
			rows, cols := rowsCols(x)
			if out.Numel() != cols {
				panic(fmt.Sprintf("devtensor: column sums of %d columns into %d elements", cols, out.Numel()))
			}
			d.colSums("sum rows", out, x, nil, rows, cols, false)
		},
		SumAll: func(out, x *tensor.Tensor) { d.sumAll("sum", out, x) },
		LogSoftmax: func(y, x *tensor.Tensor) {
			same("log softmax", y, x)
			rows, cols := rowsCols(x)
			d.launch("log_softmax_f32", min(max(rows, 1), maxGrid), d.ptr("log softmax", y), d.ptr("log softmax", x), i64(rows), i64(cols))
		},
		LogSoftmaxBackward: func(dx, dy, y *tensor.Tensor) {
			same("log softmax backward", dx, dy, y)
			rows, cols := rowsCols(y)
			d.launch("log_softmax_bwd_f32", min(max(rows, 1), maxGrid), d.ptr("log softmax backward", dx),
				d.ptr("log softmax backward", dy), d.ptr("log softmax backward", y), i64(rows), i64(cols))
		},
		SoftmaxCrossEntropy: d.softmaxCrossEntropy,
		MSE: func(grad, loss, pred, target *tensor.Tensor, gradScale, lossScale float32) {
			n := same("mse", grad, pred, target)
			sq := tensor.MustEmptyOn(d, n) // mse_f32 writes every square
			d.launch("mse_f32", grid(n), d.ptr("mse", grad), d.ptr("mse", sq), d.ptr("mse", pred), d.ptr("mse", target), i64(n), f32(gradScale))
			d.sumAll("mse", loss, sq)
			tensor.ReleaseScratch(sq)
			d.launch("scale_f32", 1, d.ptr("mse", loss), d.ptr("mse", loss), i64(1), f32(lossScale))
		},
		SumSquares: func(out, x *tensor.Tensor) {
			n := x.Numel()
			d.launch("sum_squares_f32", grid(n), d.ptr("sum of squares", out), d.ptr("sum of squares", x), i64(n))
		},
		ClipCoef: func(coef, norm, sumsq *tensor.Tensor, maxNorm float32) {
			d.launch("clip_coef_f32", 1, d.ptr("clip", coef), d.ptr("clip", norm), d.ptr("clip", sumsq), f32(maxNorm))
		},
		SGDMomentum: func(w, g, buf *tensor.Tensor, lr, momentum, dampening, wd float32, nesterov, first bool) {
			n := same("sgd", w, g, buf)
			d.launch("sgd_momentum_f32", grid(n), d.ptr("sgd", w), d.ptr("sgd", g), d.ptr("sgd", buf), i64(n),
				f32(lr), f32(momentum), f32(dampening), f32(wd), flag(nesterov), flag(first))
		},
		Adam: func(w, g, m, v *tensor.Tensor, lr, beta1, beta2, eps, wd float32, decoupled bool, stepSize, invBC2 float32) {
			n := same("adam", w, g, m, v)
			d.launch("adam_f32", grid(n), d.ptr("adam", w), d.ptr("adam", g), d.ptr("adam", m), d.ptr("adam", v), i64(n),
				f32(lr), f32(beta1), f32(beta2), f32(eps), f32(wd), flag(decoupled), f32(stepSize), f32(invBC2))
		},

		// Convolutional networks.
		Im2col: func(cols, x *tensor.Tensor, s *tensor.Conv2dShape) {
			n := s.C * s.KH * s.KW * s.N * s.OH * s.OW
			if x.Numel() != s.N*s.C*s.H*s.W || cols.Numel() != n {
				panic(fmt.Sprintf("devtensor: im2col of %v into %v for %+v", x.Shape(), cols.Shape(), *s))
			}
			d.launch("im2col_f32", grid(n), append([]uint64{d.ptr("im2col", cols), d.ptr("im2col", x)}, convArgs(s)...)...)
		},
		Col2im: func(dx, cols *tensor.Tensor, s *tensor.Conv2dShape) {
			n := s.N * s.C * s.H * s.W
			if dx.Numel() != n || cols.Numel() != s.C*s.KH*s.KW*s.N*s.OH*s.OW {
				panic(fmt.Sprintf("devtensor: col2im of %v into %v for %+v", cols.Shape(), dx.Shape(), *s))
			}
			d.launch("col2im_f32", grid(n), append([]uint64{d.ptr("col2im", dx), d.ptr("col2im", cols)}, convArgs(s)...)...)
		},
		Swap01: func(dst, src *tensor.Tensor, na, nb, nk int) {
			n := same("swap01", dst, src)
			if n != na*nb*nk {
				panic(fmt.Sprintf("devtensor: swap01 of %d elements as [%d, %d, %d]", n, na, nb, nk))
			}
			d.launch("swap01_f32", grid(n), d.ptr("swap01", dst), d.ptr("swap01", src), i64(na), i64(nb), i64(nk))
		},
		AddChannelBias: func(y, bias *tensor.Tensor, n, c, l int) {
			if y.Numel() != n*c*l || bias.Numel() != c {
				panic(fmt.Sprintf("devtensor: channel bias %v for %v as [%d, %d, %d]", bias.Shape(), y.Shape(), n, c, l))
			}
			d.launch("add_channel_bias_f32", grid(n*c*l), d.ptr("channel bias", y), d.ptr("channel bias", bias), i64(n), i64(c), i64(l))
		},
		SumChannels: func(out, x *tensor.Tensor, n, c, l int, acc bool) {
			if x.Numel() != n*c*l || out.Numel() != c {
				panic(fmt.Sprintf("devtensor: channel sums of %v as [%d, %d, %d] into %v", x.Shape(), n, c, l, out.Shape()))
			}
			d.sumChannels(out, x, n, c, l, acc)
		},
		MaxPool2d: func(y, idx, x *tensor.Tensor, s *tensor.Pool2dShape) {
			n := same("max pool", y, idx)
			if n != s.N*s.C*s.OH*s.OW || x.Numel() != s.N*s.C*s.H*s.W {
				panic(fmt.Sprintf("devtensor: max pool of %v into %v for %+v", x.Shape(), y.Shape(), *s))
			}
			d.launch("max_pool2d_f32", grid(n), append([]uint64{d.ptr("max pool", y), d.ptr("max pool", idx), d.ptr("max pool", x)}, poolArgs(s)...)...)
		},
		MaxPool2dBackward: func(dx, dy, idx *tensor.Tensor, s *tensor.Pool2dShape) {
			same("max pool backward", dy, idx)
			n := s.N * s.C * s.H * s.W
			if dx.Numel() != n || dy.Numel() != s.N*s.C*s.OH*s.OW {
				panic(fmt.Sprintf("devtensor: max pool backward of %v into %v for %+v", dy.Shape(), dx.Shape(), *s))
			}
			d.launch("max_pool2d_bwd_f32", grid(n), append([]uint64{d.ptr("max pool backward", dx), d.ptr("max pool backward", dy),
				d.ptr("max pool backward", idx)}, poolArgs(s)...)...)
		},
		Dropout: func(y, x *tensor.Tensor, p float64, seed uint64) {
			n := same("dropout", y, x)
			keep := float32(1 - p)
			d.launch("dropout_f32", grid(n), d.ptr("dropout", y), d.ptr("dropout", x), i64(n), seed, f32(keep), f32(1/keep))
		},
		AvgPool2d: func(y, x *tensor.Tensor, s *tensor.Pool2dShape, incl, adaptive bool) {
			n := y.Numel()
			if n != s.N*s.C*s.OH*s.OW || x.Numel() != s.N*s.C*s.H*s.W {
				panic(fmt.Sprintf("devtensor: avg pool of %v into %v for %+v", x.Shape(), y.Shape(), *s))
			}
			d.launch("avg_pool2d_f32", grid(n), append(append([]uint64{d.ptr("avg pool", y), d.ptr("avg pool", x)},
				poolArgs(s)...), flag(incl), flag(adaptive))...)
		},
		AvgPool2dBackward: func(dx, dy *tensor.Tensor, s *tensor.Pool2dShape, incl, adaptive bool) {
			n := dx.Numel()
			if n != s.N*s.C*s.H*s.W || dy.Numel() != s.N*s.C*s.OH*s.OW {
				panic(fmt.Sprintf("devtensor: avg pool backward of %v into %v for %+v", dy.Shape(), dx.Shape(), *s))
			}
			d.launch("avg_pool2d_bwd_f32", grid(n), append(append([]uint64{d.ptr("avg pool backward", dx), d.ptr("avg pool backward", dy)},
				poolArgs(s)...), flag(incl), flag(adaptive))...)
		},
		StridedCopy: d.stridedCopy,
		// Transformer ops (examples/gpt).
		IndexSelect:       d.indexSelect,
		IndexAdd:          d.indexAdd,
		LayerNorm:         d.layerNorm,
		LayerNormBackward: d.layerNormBackward,
		GELU: func(y, x *tensor.Tensor) {
			n := same("gelu", y, x)
			d.launch("gelu_f32", grid(n), d.ptr("gelu", y), d.ptr("gelu", x), i64(n))
		},
		GELUBackward: func(dx, dy, x *tensor.Tensor) {
			n := same("gelu backward", dx, dy, x)
			d.launch("gelu_bwd_f32", grid(n), d.ptr("gelu backward", dx), d.ptr("gelu backward", dy), d.ptr("gelu backward", x), i64(n))
		},
		Softmax: func(y, x *tensor.Tensor) {
			same("softmax", y, x)
			rows, cols := rowsCols(x)
			d.launch("softmax_f32", min(max(rows, 1), maxGrid), d.ptr("softmax", y), d.ptr("softmax", x), i64(rows), i64(cols))
		},
		SoftmaxBackward: func(dx, dy, y *tensor.Tensor) {
			same("softmax backward", dx, dy, y)
			rows, cols := rowsCols(y)
			d.launch("softmax_bwd_f32", min(max(rows, 1), maxGrid), d.ptr("softmax backward", dx),
				d.ptr("softmax backward", dy), d.ptr("softmax backward", y), i64(rows), i64(cols))
		},
		AttentionSoftmax: func(p *tensor.Tensor, l int, causal bool) {
			rows, s := rowsCols(p)
			if l <= 0 || rows%l != 0 {
				panic(fmt.Sprintf("devtensor: attention softmax of %d rows in matrices of %d", rows, l))
			}
			d.launch("attn_softmax_f32", grid(rows), d.ptr("attention softmax", p), i64(rows), i64(l), i64(s), flag(causal))
		},
		AttentionSoftmaxBackward: func(dp, p *tensor.Tensor) {
			same("attention softmax backward", dp, p)
			rows, s := rowsCols(p)
			d.launch("attn_softmax_bwd_f32", grid(rows), d.ptr("attention softmax backward", dp), d.ptr("attention softmax backward", p), i64(rows), i64(s))
		},
		FlashAttention:         d.flashAttention,
		FlashAttentionBackward: d.flashAttentionBackward,
		// Elementwise ops of the tensor package (Sub, Mul, Div; Exp, Log,
		// Sqrt, Tanh, Sigmoid).
		Sub:             d.binary("sub_f32"),
		Mul:             d.binary("mul_f32"),
		Div:             d.binary("div_f32"),
		Exp:             d.unary("exp_f32"),
		Log:             d.unary("log_f32"),
		Sqrt:            d.unary("sqrt_f32"),
		Tanh:            d.unary("tanh_f32"),
		Sigmoid:         d.unary("sigmoid_f32"),
		TanhBackward:    d.binary("tanh_bwd_f32"),
		SigmoidBackward: d.binary("sigmoid_bwd_f32"),
		SqrtBackward:    d.binary("sqrt_bwd_f32"),
		// Batch norm and where (norm.go).
		BatchNormStats:          d.batchNormStats,
		BatchNormFinalize:       d.batchNormFinalize,
		BatchNormApply:          d.batchNormApply,
		BatchNormBackwardReduce: d.batchNormBackwardReduce,
		BatchNormBackwardInput:  d.batchNormBackwardInput,
		Where:                   d.where,
		// ---- bf16 autocast (bf16.go)
		GemmBF16: d.gemmBF16,
	}
}

// sumAll writes Σ x into the one-element out. One block when x is small, so
// that the sum is deterministic (blocks add into out atomically).
func (d *Device) sumAll(op string, out, x *tensor.Tensor) {
	if out.Numel() != 1 {
		panic(fmt.Sprintf("devtensor: %s into a tensor of shape %v", op, out.Shape()))
	}
	n := x.Numel()
	p := d.ptr(op, out)
	d.launch("fill_f32", 1, p, f32(0), i64(1))
	d.launch("sum_f32", grid(n), p, d.ptr(op, x), i64(n))
}

func (d *Device) softmaxCrossEntropy(grad, loss, logits *tensor.Tensor, labels []int, scale float32) {
	same("cross entropy", grad, logits)
	rows, cols := rowsCols(logits)
	if len(labels) != rows {
		panic(fmt.Sprintf("devtensor: cross entropy of %d rows with %d labels", rows, len(labels)))
	}
	lab := make([]int32, rows)
	for i, l := range labels {
		if l < 0 || l >= cols {
			panic(fmt.Sprintf("devtensor: cross entropy label[%d] = %d outside [0, %d)", i, l, cols))
		}
		lab[i] = int32(l)
	}
	lt := d.int32s("cross entropy", lab)
	per := tensor.MustEmptyOn(d, rows) // softmax_ce_f32 writes every row's loss
	d.launch("softmax_ce_f32", grid(rows), d.ptr("cross entropy", grad), d.ptr("cross entropy", per),
		d.ptr("cross entropy", logits), d.ptr("cross entropy", lt), i64(rows), i64(cols), f32(scale))
	d.sumAll("cross entropy", loss, per)
	tensor.ReleaseScratch(per)
	tensor.ReleaseScratch(lt)
	d.launch("scale_f32", 1, d.ptr("cross entropy", loss), d.ptr("cross entropy", loss), i64(1), f32(scale))
}

// int32s uploads v as int32 into a float32-sized device buffer (kernels
// index with it); the caller releases it (tensor.ReleaseScratch) once the
// kernels that read it have been queued, after which the caching
// allocator reuses it only for later work on the same stream.
func (d *Device) int32s(op string, v []int32) *tensor.Tensor {
	t := tensor.MustEmptyOn(d, max(len(v), 1)) // the upload writes it whole
	m, off := d.mem(op, t)
	if len(v) > 0 {
		d.l.CopyHtoD(m, off, hostBytes(v))
	}
	return t
}

// indexArgs checks index_select's operands and idx.
func indexArgs(op string, x, y *tensor.Tensor, idx []int, outer, n, inner int) {
	if x.Numel() != outer*n*inner || y.Numel() != outer*len(idx)*inner {
		panic(fmt.Sprintf("devtensor: %s: operands of shapes %v and %v for [%d, %d, %d] and %d indices",
			op, x.Shape(), y.Shape(), outer, n, inner, len(idx)))
	}
	for k, j := range idx {
		if j < 0 || j >= n {
			panic(fmt.Sprintf("devtensor: %s: idx[%d] = %d outside [0, %d)", op, k, j, n))
		}
	}
}

func (d *Device) indexSelect(y, x *tensor.Tensor, idx []int, outer, n, inner int) {
	indexArgs("index select", x, y, idx, outer, n, inner)
	m := len(idx)
	if outer*m*inner == 0 {
		return
	}
	iv := make([]int32, m)
	for k, j := range idx {
		iv[k] = int32(j)
	}
	it := d.int32s("index select", iv)
	d.launch("index_select_f32", grid(outer*m*inner), d.ptr("index select", y), d.ptr("index select", x), d.ptr("index select", it),
		i64(outer), i64(n), i64(m), i64(inner))
	tensor.ReleaseScratch(it)
}

// indexAdd groups the positions k by their row idx[k] on the host (a
// counting sort, k increasing within a row), so that index_add_f32 sums
// every row of gx in one thread, in the CPU op's order, without atomics.
func (d *Device) indexAdd(gx, gy *tensor.Tensor, idx []int, outer, n, inner int) {
	indexArgs("index add", gx, gy, idx, outer, n, inner)
	m := len(idx)
	if outer*n*inner == 0 || m == 0 {
		return
	}
	start := make([]int32, n+1)
	for _, j := range idx {
		start[j+1]++
	}
	for j := range n {
		start[j+1] += start[j]
	}
	pos, next := make([]int32, m), append([]int32(nil), start[:n]...)
	for k, j := range idx {
		pos[next[j]] = int32(k)
		next[j]++
	}
	st, pt := d.int32s("index add", start), d.int32s("index add", pos)
	d.launch("index_add_f32", grid(outer*n*inner), d.ptr("index add", gx), d.ptr("index add", gy), d.ptr("index add", st),
		d.ptr("index add", pt), i64(outer), i64(n), i64(m), i64(inner))
	tensor.ReleaseScratch(st)
	tensor.ReleaseScratch(pt)
}

// optPtr is ptr for an optional operand: 0 (a null pointer) for nil.
func (d *Device) optPtr(op string, t *tensor.Tensor) uint64 {
	if t == nil {
		return 0
	}
	return d.ptr(op, t)
}

// sumChannels sets out[ch] (adds to it, with acc) to the sum of x [n, c, l]
// over its images and positions (twoStageSums; sum_channels_part_f32 sums
// a chunk of images for one channel). A chunk is about 2048 values of a
// channel (at least one image), so that a batch of 512 images makes a few
// thousand work items.
func (d *Device) sumChannels(out, x *tensor.Tensor, n, c, l int, acc bool) {
	chunk := max(1, 2048/max(l, 1))
	chunks := (n + chunk - 1) / chunk
	if l == 0 {
		chunks = 0
	}
	d.twoStageSums("channel sums", out, c, chunks, acc, func(part uint64) {
		d.launch("sum_channels_part_f32", min(chunks*c, maxGrid), part, d.ptr("channel sums", x), i64(n), i64(c), i64(l), i64(chunk))
	})
}

// colSumsChunk is the rows a work item of col_sums_part_f32 sums: 256
// rows, 32 per thread, give the [B*T, d] reductions of a transformer
// (16384 rows at batch 256) 64 chunks a column tile, enough items to fill
// a GPU; a one-thread-per-column loop over the rows left it nearly idle
// (128 to 512 threads, each 16384 loads in sequence).
const colSumsChunk = 256

// colSums sets out[c] (adds to it, with acc) to the sum over rows of x[r, c]
// times y[r, c] (x alone when y is nil), over [rows, cols] (twoStageSums;
// col_sums_part_f32 sums a chunk of rows for 32 columns).
func (d *Device) colSums(op string, out, x, y *tensor.Tensor, rows, cols int, acc bool) {
	chunks := (rows + colSumsChunk - 1) / colSumsChunk
	d.twoStageSums(op, out, cols, chunks, acc, func(part uint64) {
		items := chunks * ((cols + 31) / 32)
		d.launch("col_sums_part_f32", min(items, maxGrid), part, d.ptr(op, x), d.optPtr(op, y), i64(rows), i64(cols), i64(colSumsChunk))
	})
}

// twoStageSums sets out[cols] (adds to it, with acc) to sums taken in two
// stages: first queues the first stage, which writes a partial sum per
// chunk and column into part ([chunks, cols], a scratch block), and
// col_sums_f32 adds the chunks column by column, in order. The partition
// is fixed by the shape, so the result is deterministic. With no chunks
// (nothing to sum) out is zeroed, or left alone with acc.
func (d *Device) twoStageSums(op string, out *tensor.Tensor, cols, chunks int, acc bool, first func(part uint64)) {
	if cols == 0 {
		return
	}
	if chunks == 0 {
		if !acc {
			d.launch("fill_f32", grid(cols), d.ptr(op, out), f32(0), i64(cols))
		}
		return
	}
	part := d.scratch(chunks*cols, 4)
	first(part.mem.Ptr())
	d.launch("col_sums_f32", grid(cols), d.ptr(op, out), part.mem.Ptr(), i64(chunks), i64(cols), flag(acc))
	part.Release() // the launches above are queued before any later user of the block
}
