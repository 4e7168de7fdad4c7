package nn

import "fmt"

// WindowOption sets one of torch's keyword arguments of Conv2d and the 2-d
// pooling layers (stride, padding, dilation, groups, bias,
// count_include_pad). A constructor given an option its torch counterpart
// does not take panics, naming both.
type WindowOption func(*window)

// window collects the options; set records which were given.
type window struct {
	kernel, stride, padding, dilation [2]int
	same, noBias, excludePad          bool
	groups                            int
	set                               map[string]bool
}

func (w *window) mark(name string) {
	if w.set == nil {
		w.set = map[string]bool{}
	}
	w.set[name] = true
}

// pair reads torch's "int or tuple" argument: one value for both sides or (h, w).
func pair(name string, v []int) [2]int {
	switch len(v) {
	case 1:
		return [2]int{v[0], v[0]}
	case 2:
		return [2]int{v[0], v[1]}
	}
	panic(fmt.Sprintf("nn: %s takes one value or two (h, w), got %v", name, v))
}

// KernelSize sets a rectangular kernel (h, w), overriding the square size
// passed to the constructor.
func KernelSize(h, w int) WindowOption {
	return func(o *window) { o.kernel = [2]int{h, w}; o.mark("kernel_size") }
}

// Stride sets the stride: one value, or (h, w).
func Stride(s ...int) WindowOption {
	return func(o *window) { o.stride = pair("stride", s); o.mark("stride") }
}

// Padding sets implicit zero padding on both sides: one value, or (h, w).
func Padding(p ...int) WindowOption {
	return func(o *window) { o.padding = pair("padding", p); o.same = false; o.mark("padding") }
}

// PaddingSame is Conv2d's padding="same" (stride 1 only): the output keeps
// the input's height and width.
func PaddingSame() WindowOption {
	return func(o *window) { o.same = true; o.mark("padding") }
}

// Dilation sets Conv2d's kernel dilation: one value, or (h, w).
func Dilation(d ...int) WindowOption {
	return func(o *window) { o.dilation = pair("dilation", d); o.mark("dilation") }
}

// Groups sets Conv2d's groups; groups == in channels is a depthwise convolution.
func Groups(g int) WindowOption { return func(o *window) { o.groups = g; o.mark("groups") } }

// NoBias is Conv2d's bias=False.
func NoBias() WindowOption { return func(o *window) { o.noBias = true; o.mark("bias") } }

// CountIncludePad sets AvgPool2d's count_include_pad (default true).
func CountIncludePad(on bool) WindowOption {
	return func(o *window) { o.excludePad = !on; o.mark("count_include_pad") }
}

func applyWindow(layer string, kernel int, allowed []string, opts []WindowOption) window {
	w := window{kernel: [2]int{kernel, kernel}, groups: 1}
	for _, o := range opts {
		o(&w)
	}
	for name := range w.set {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			panic(fmt.Sprintf("nn: %s has no option %s", layer, name))
		}
	}
	return w
}
