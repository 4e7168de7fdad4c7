//go:build !cgo || noblas

package tensor

// uniform64 writes len(dst) Float64 draws, a run of the state at a time
// (mt19937.fill).
func (m *mt19937) uniform64(dst []float64) {
	var buf [512]uint32
	for len(dst) > 0 {
		n := min(len(dst), len(buf)/2)
		m.fill(buf[:2*n])
		for i := range dst[:n] {
			r := uint64(buf[2*i])<<32 | uint64(buf[2*i+1])
			// As int64, the 53 bits convert in one instruction; Go
			// converts a uint64 with a branch for the top bit.
			dst[i] = float64(int64(r&(1<<53-1))) * 0x1p-53
		}
		dst = dst[n:]
	}
}

// dropoutF32 is RNG.DropoutF32 for keep > 0.
func (m *mt19937) dropoutF32(y, mask, x []float32, keep float64, scale float32) {
	mtDropout(m, y, mask, x, keep, scale)
}
