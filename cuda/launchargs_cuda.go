//go:build cuda

package cuda

import (
	"fmt"
	"math"
)

// Launch geometry and argument encoding shared by the kernels' callers
// (the tensor device's launcher, the queues' scale). Every kernel loops
// grid-stride, so a capped grid covers any element count.
const (
	block = 256
	// maxGrid caps the blocks per launch; the kernels loop over the
	// rest (grid-stride), so any element count works.
	maxGrid = 1 << 20
)

// grid is the number of blocks for n elements.
func grid(n int) uint32 { return uint32(min((int64(n)+block-1)/block, maxGrid)) }

// intArg is a 64-bit count or index argument: the kernels index in 64
// bits, so counts of 2^31 and more reach them whole.
func intArg(n int) uint64 { return uint64(int64(n)) }

// fits32 checks that every cuBLAS dimension fits its 32-bit int.
func fits32(op string, dims ...int) error {
	for _, d := range dims {
		if d > math.MaxInt32 {
			return fmt.Errorf("%w: %s: dimension %d", ErrTooLarge, op, d)
		}
	}
	return nil
}

// f32Arg is a float32 argument: its bits in the low half.
func f32Arg(f float32) uint64 { return uint64(math.Float32bits(f)) }

// launch runs kernel name over n elements on the compute stream.
func (c *Context) launch(name string, n int, args ...uint64) error {
	if n == 0 {
		return nil
	}
	return c.do(func() error {
		if err := c.dev.launch(name, grid(n), block, args); err != nil {
			return fmt.Errorf("cuda: kernel %s over %d elements: %w", name, n, err)
		}
		return nil
	})
}
