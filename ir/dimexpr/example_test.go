package dimexpr_test

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Example follows a dynamic-resolution image through a 7x7 convolution
// with stride 2 and padding 3, then a 3x3 pooling with stride 2 and
// padding 1, and evaluates the result for one input size.
func Example() {
	h := dimexpr.Sym("H")
	conv, _ := h.AddConst(3 + 3 - 7).FloorDiv(dimexpr.Const(2))
	conv = conv.AddConst(1)
	pool, _ := conv.AddConst(1 + 1 - 3).FloorDiv(dimexpr.Const(2))
	pool = pool.AddConst(1)
	fmt.Println(conv, "then", pool)

	v, _ := pool.Eval(map[string]int64{"H": 224})
	fmt.Println("at H = 224:", v)

	// dim_params from exporters parse to the same canonical form.
	e, _ := dimexpr.Parse("floor((floor((H - 1)/2) + 1 - 1)/2) + 1")
	fmt.Println(e, e.Equal(pool))

	// The tree is what a code generator lowers.
	t := pool.Tree()
	fmt.Println(t.Op, t.Args[0].Op, t.Args[1].Value)
	// Output:
	// (H + 1)//2 then (H + 3)//4
	// at H = 224: 56
	// (H + 3)//4 true
	// FloorDiv Add 4
}
