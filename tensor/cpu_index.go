package tensor

// The host's entries of the indexing and copying ops (Gather, ScatterAdd,
// IndexSelect, IndexAdd, Concat's CopyBlock, StridedCopy): the loops that
// autograd's ops and this package's ran over host slices, moved behind
// the table unchanged. Indices were checked by the functions that call
// them (index.go), so the loops do not check again.

func cpuGather(y, x *Tensor, index []int, outer, n, inner int) {
	if x.dtype == Float64 {
		gatherRows(f64s(y), f64s(x), index, outer, n, inner)
		return
	}
	gatherRows(f32s(y), f32s(x), index, outer, n, inner)
}

func gatherRows[T float](dst, src []T, index []int, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		d, idx := dst[o*inner:(o+1)*inner], index[o*inner:(o+1)*inner]
		for j, k := range idx {
			d[j] = src[(o*n+k)*inner+j]
		}
	}
}

func cpuScatterAdd(gx, gy *Tensor, index []int, outer, n, inner int) {
	if gx.dtype == Float64 {
		scatterAddRows(f64s(gx), f64s(gy), index, outer, n, inner)
		return
	}
	scatterAddRows(f32s(gx), f32s(gy), index, outer, n, inner)
}

func scatterAddRows[T float](dst, src []T, index []int, outer, n, inner int) {
	for o := 0; o < outer; o++ {
		s, idx := src[o*inner:(o+1)*inner], index[o*inner:(o+1)*inner]
		for j, k := range idx {
			dst[(o*n+k)*inner+j] += s[j]
		}
	}
}

func cpuIndexSelect(y, x *Tensor, idx []int, outer, n, inner int) {
	if x.dtype == Float64 {
		selectBlock(f64s(y), f64s(x), idx, outer, n, inner)
		return
	}
	selectBlock(f32s(y), f32s(x), idx, outer, n, inner)
}

func selectBlock[T float](dst, src []T, idx []int, outer, n, inner int) {
	m := len(idx)
	for o := 0; o < outer; o++ {
		for j, k := range idx {
			copy(dst[(o*m+j)*inner:(o*m+j+1)*inner], src[(o*n+k)*inner:(o*n+k+1)*inner])
		}
	}
}

func cpuIndexAdd(gx, gy *Tensor, idx []int, outer, n, inner int) {
	if gx.dtype == Float64 {
		indexAddBlock(f64s(gx), f64s(gy), idx, outer, n, inner)
		return
	}
	indexAddBlock(f32s(gx), f32s(gy), idx, outer, n, inner)
}

func indexAddBlock[T float](dst, src []T, idx []int, outer, n, inner int) {
	m := len(idx)
	for o := 0; o < outer; o++ {
		for j, k := range idx {
			d := dst[(o*n+k)*inner : (o*n+k+1)*inner]
			for i, v := range src[(o*m+j)*inner : (o*m+j+1)*inner] {
				d[i] += v
			}
		}
	}
}

func cpuCopyBlock(dst, src *Tensor, outer, w, dstStride, dstOff, srcStride, srcOff int) {
	if dst.dtype == Float64 {
		copyBlock(f64s(dst), f64s(src), outer, w, dstStride, dstOff, srcStride, srcOff)
		return
	}
	copyBlock(f32s(dst), f32s(src), outer, w, dstStride, dstOff, srcStride, srcOff)
}

func copyBlock[T float](dst, src []T, outer, w, dstStride, dstOff, srcStride, srcOff int) {
	for o := 0; o < outer; o++ {
		d, s := o*dstStride+dstOff, o*srcStride+srcOff
		copy(dst[d:d+w], src[s:s+w])
	}
}

// cpuStridedCopy is Contiguous's copy on the host, in runs: the trailing
// dimensions that src reads contiguously are one copy, those it
// broadcasts one fill, so that a broadcast gradient (a sum's, spread back
// over its input) costs a memset-like pass rather than an index walk per
// element.
func cpuStridedCopy(dst, src *Tensor) {
	if dst.dtype == Float64 {
		stridedCopy(f64s(dst), src.f64, src)
		return
	}
	stridedCopy(f32s(dst), src.f32, src)
}

func stridedCopy[T float](out, data []T, src *Tensor) {
	n := len(out)
	if n == 0 {
		return
	}
	shape, strides := src.shape, src.strides
	d := len(shape) - 1
	for d >= 0 && shape[d] == 1 {
		d--
	}
	if d < 0 { // one element
		out[0] = data[src.offset]
		return
	}
	inner, kind := 1, strides[d]
	switch kind {
	case 0: // trailing broadcast dimensions: fill runs with one value
		for d >= 0 && (shape[d] == 1 || strides[d] == 0) {
			inner *= shape[d]
			d--
		}
	case 1: // trailing contiguous dimensions: copy runs
		for d >= 0 && (shape[d] == 1 || strides[d] == inner) {
			inner *= shape[d]
			d--
		}
	default: // a strided innermost dimension: element by element
		inner = shape[d]
		d--
	}
	idx := make([]int, d+1)
	base := src.offset
	for k := 0; k < n; k += inner {
		run := out[k : k+inner]
		switch kind {
		case 0:
			v := data[base]
			for j := range run {
				run[j] = v
			}
		case 1:
			copy(run, data[base:base+inner])
		default:
			p := base
			for j := range run {
				run[j] = data[p]
				p += kind
			}
		}
		base = stepIndex(idx, shape, strides, base)
	}
}

// stepIndex advances the multi-index idx (over shape[:len(idx)]) in C
// order and returns the new offset under strides.
func stepIndex(idx, shape, strides []int, off int) int {
	for q := len(idx) - 1; q >= 0; q-- {
		idx[q]++
		off += strides[q]
		if idx[q] < shape[q] {
			return off
		}
		off -= strides[q] * idx[q]
		idx[q] = 0
	}
	return off
}
