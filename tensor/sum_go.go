//go:build !cgo || noblas

package tensor

// Without cgo SumAll runs reduce.go's Go loop at every length.
const sumCMin = 1 << 62

func sumC[T float](x []T) float64 { panic("tensor: sumC without cgo") }

func sumSquaresC(x []float32) float64 { panic("tensor: sumSquaresC without cgo") }
