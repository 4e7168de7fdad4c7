package tensor

// mt19937 is the 32-bit Mersenne Twister exactly as torch's at::mt19937
// (ATen/core/MT19937RNGEngine.h): Matsumoto and Nishimura's init_genrand
// seeding from the low 32 bits of a 64-bit seed, the standard tempering, and
// torch's bookkeeping of left/next so that its state maps one to one onto
// torch's get_state() bytes.
type mt19937 struct {
	seed  uint64
	left  int32
	next  uint32
	state [mtN]uint32
}

const (
	mtN       = 624
	mtM       = 397
	mtMatrixA = 0x9908b0df
	mtUMask   = 0x80000000
	mtLMask   = 0x7fffffff
)

func (m *mt19937) init(seed uint64) {
	m.seed = seed
	m.state[0] = uint32(seed)
	for j := 1; j < mtN; j++ {
		p := m.state[j-1]
		m.state[j] = 1812433253*(p^(p>>30)) + uint32(j)
	}
	m.left, m.next = 1, 0
}

func mtTwist(u, v uint32) uint32 {
	y := ((u & mtUMask) | (v & mtLMask)) >> 1
	if v&1 != 0 {
		y ^= mtMatrixA
	}
	return y
}

func (m *mt19937) nextState() {
	s := &m.state
	m.left, m.next = mtN, 0
	for j := 0; j < mtN-mtM; j++ {
		s[j] = s[j+mtM] ^ mtTwist(s[j], s[j+1])
	}
	for j := mtN - mtM; j < mtN-1; j++ {
		s[j] = s[j+mtM-mtN] ^ mtTwist(s[j], s[j+1])
	}
	s[mtN-1] = s[mtM-1] ^ mtTwist(s[mtN-1], s[0])
}

// uint32 is torch's engine_(): one tempered 32-bit output.
func (m *mt19937) uint32() uint32 {
	m.left--
	if m.left == 0 {
		m.nextState()
	}
	y := m.state[m.next]
	m.next++
	return mtTemper(y)
}

func mtTemper(y uint32) uint32 {
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// fill writes the next len(dst) outputs of uint32 into dst, the same
// sequence and bookkeeping, a run of the state at a time: the pure-Go
// build's RNG.Float64s and RNG.DropoutF32 (mt19937_go.go; cgo builds run
// mt19937_kernels.c). A call per output was most of a Dropout's time.
func (m *mt19937) fill(dst []uint32) {
	for len(dst) > 0 {
		if m.left == 1 { // uint32's next call regenerates and returns state[0]
			m.nextState()
			dst[0] = mtTemper(m.state[0])
			m.next = 1
			dst = dst[1:]
			continue
		}
		// left-1 outputs come from state[next:] before the next regeneration.
		k := min(int(m.left-1), len(dst))
		for i, y := range m.state[m.next : int(m.next)+k] {
			dst[i] = mtTemper(y)
		}
		m.next += uint32(k)
		m.left -= int32(k)
		dst = dst[k:]
	}
}

// mtDropout is RNG.DropoutF32's and DropoutF64's rule in Go for keep > 0,
// a block of draws at a time (uniform64).
func mtDropout[T float](m *mt19937, y, mask, x []T, keep float64, scale T) {
	var u [256]float64
	for off := 0; off < len(y); off += len(u) {
		n := min(len(u), len(y)-off)
		m.uniform64(u[:n])
		for i, v := range x[off : off+n] {
			var s T
			if u[i] < keep {
				s = scale
			}
			mask[off+i] = s
			y[off+i] = v * s
		}
	}
}
