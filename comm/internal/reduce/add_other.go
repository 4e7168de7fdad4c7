//go:build !amd64

package reduce

// No vector kernels off amd64: reduce.go's portable ones are used.
func HasAVX() bool { return false }

func AddFast(dst, src Buffer) bool { return false }
