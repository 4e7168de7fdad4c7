//go:build !cgo

package tensor

import "math"

// Without cgo the float64 Box-Muller uses Go's math package, whose log, sin
// and cos differ from glibc's in the last bit for some arguments (about one
// float64 normal in five then differs from torch's by an ulp or two).
func libmLog(x float64) float64 { return math.Log(x) }
func libmSin(x float64) float64 { return math.Sin(x) }
func libmCos(x float64) float64 { return math.Cos(x) }

const libmExact = false
