package ops

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIntPowWraps: integer Pow is exact modulo 2^64 for every exponent
// (big.Int's), for signed and unsigned exponents.
func TestIntPowWraps(t *testing.T) {
	mod := new(big.Int).Lsh(big.NewInt(1), 64)
	for _, c := range []struct{ a, b uint64 }{{3, 40}, {3, 64}, {7, 1001}, {12345, 9}, {2, 63}, {5, 0}} {
		want := new(big.Int).Exp(new(big.Int).SetUint64(c.a), new(big.Int).SetUint64(c.b), mod).Uint64()
		assert.Equal(t, want, uint64(IntPow(int64(c.a), int64(c.b), false)), "%d^%d", c.a, c.b)
		assert.Equal(t, want, uint64(IntPow(int64(c.a), int64(c.b), true)), "%d^%d signed", c.a, c.b)
	}
}
