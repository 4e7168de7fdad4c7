//go:build !cgo || noblas

package tensor

// Without cgo add/sub/mul/div run binary.go's Go loops at every length.
const binCMin = 1 << 62

func binVVC[T float](op binOp, dst, x, y []T) bool { return false }

func binVSC[T float](op binOp, dst, x []T, s T) bool { return false }

func binSVC[T float](op binOp, dst []T, s T, y []T) bool { return false }
