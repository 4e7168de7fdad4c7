//go:build !amd64

package optim

type adamConsts struct{ b1, omb1, b2, omb2, invBc2, eps, step float32 }

// No vector kernel off amd64: the scalar loop does all the work.
func adamF32Vec(p, g, m, v []float32, c adamConsts) int { return 0 }
