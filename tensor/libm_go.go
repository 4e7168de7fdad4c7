//go:build !cgo

package tensor

import "math"

// Without cgo the float64 Box-Muller uses Go's math package, which agrees
// with glibc's log/sin/cos except in the last bit for a few arguments.
func libmLog(x float64) float64 { return math.Log(x) }
func libmSin(x float64) float64 { return math.Sin(x) }
func libmCos(x float64) float64 { return math.Cos(x) }

const libmExact = false
