//go:build !amd64

package comm

// No vector kernels off amd64: reduce.go's portable ones are used.
func shmHasAVX() bool { return false }

func shmAddFast(dst, src Buffer) bool { return false }
