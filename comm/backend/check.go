package backend

import "fmt"

// The argument checks every backend makes before it issues an op. Each
// returns why the argument is bad (nil when it is fine) without the
// ErrBadArgument kind: the backend wraps it in an *OpError naming the op,
// its rank and byte count.

// CheckBuffer reports a dtype this package does not define, or a byte
// length that is not a whole number of elements.
func CheckBuffer(b Buffer) error {
	if b.DType > BFloat16 {
		return fmt.Errorf("unknown dtype %v", b.DType)
	}
	if len(b.Bytes)%b.DType.Size() != 0 {
		return fmt.Errorf("%d bytes is not a whole number of %v elements", len(b.Bytes), b.DType)
	}
	return nil
}

// CheckReduceOp reports a reduction this package does not define.
func CheckReduceOp(op ReduceOp) error {
	if op > Product {
		return fmt.Errorf("unknown reduce op %v", op)
	}
	return nil
}

// CheckRoot reports a root rank outside a group of size ranks.
func CheckRoot(root, size int) error {
	if root < 0 || root >= size {
		return fmt.Errorf("root %d outside world size %d", root, size)
	}
	return nil
}
