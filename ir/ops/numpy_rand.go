package ops

// numpyRand reproduces numpy's legacy generator (numpy.random.seed with an
// integer, then numpy.random.random_sample / uniform(0, 1)): MT19937 and
// doubles built from 53 random bits. ONNX's reference implementations of
// random ops draw from it, so kernels that must match ONNX's test data
// bit for bit (Dropout in training mode) use it too.
type numpyRand struct {
	mt  [624]uint32
	pos int
}

func newNumpyRand(seed uint32) *numpyRand {
	r := &numpyRand{pos: len(numpyRand{}.mt)}
	r.mt[0] = seed
	for i := 1; i < len(r.mt); i++ {
		prev := r.mt[i-1]
		r.mt[i] = 1812433253*(prev^prev>>30) + uint32(i)
	}
	return r
}

func (r *numpyRand) uint32() uint32 {
	const n, m = 624, 397
	if r.pos == n {
		for i := range n {
			y := r.mt[i]&0x80000000 | r.mt[(i+1)%n]&0x7fffffff
			next := r.mt[(i+m)%n] ^ y>>1
			if y&1 == 1 {
				next ^= 0x9908b0df
			}
			r.mt[i] = next
		}
		r.pos = 0
	}
	y := r.mt[r.pos]
	r.pos++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	return y ^ y>>18
}

// float64 is uniform in [0, 1).
func (r *numpyRand) float64() float64 {
	a, b := r.uint32()>>5, r.uint32()>>6
	return (float64(a)*67108864 + float64(b)) / 9007199254740992
}
