//go:build cgo

package tensor

/*
#cgo LDFLAGS: -lm
#include <math.h>
*/
import "C"

// torch's float64 Box-Muller calls the C library's log, sin and cos; calling
// the same functions gives the same last bits (Go's math package differs
// from glibc's in the last place for some arguments).
func libmLog(x float64) float64 { return float64(C.log(C.double(x))) }
func libmSin(x float64) float64 { return float64(C.sin(C.double(x))) }
func libmCos(x float64) float64 { return float64(C.cos(C.double(x))) }

// libmExact reports whether the float64 normal draws use the C library.
const libmExact = true
