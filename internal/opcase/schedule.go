package opcase

import (
	"fmt"
	"math/rand"
	"strings"
)

// ScheduleCases are the cases every schedule of the kernel layer runs (T
// is the element type under test): broadcasting patterns of Add, Mul and
// Where over ranks 1 to 6, reductions, scans, index remaps and
// selections, with empty tensors and negative axes.
func ScheduleCases() []string {
	r := rand.New(rand.NewSource(11))
	sizes := []int64{1, 7, 17}
	var lines []string
	dims := func(ds []int64) string {
		s := make([]string, len(ds))
		for i, d := range ds {
			s[i] = fmt.Sprint(d)
		}
		return "T[" + strings.Join(s, ",") + "]"
	}
	for rank := 1; rank <= 6; rank++ {
		for n := 0; n < 4; n++ {
			out := make([]int64, rank)
			total := int64(1)
			for i := range out {
				out[i] = sizes[r.Intn(len(sizes))]
				if total*out[i] > 40000 {
					out[i] = 1
				}
				total *= out[i]
			}
			if rank <= 2 && n == 0 {
				out[rank-1] = 1023
			}
			// Each operand is a suffix of the output's dims, some set to 1.
			operand := func() []int64 {
				k := r.Intn(rank + 1)
				d := append([]int64{}, out[rank-k:]...)
				for i := range d {
					if r.Intn(3) == 0 {
						d[i] = 1
					}
				}
				return d
			}
			a, b := operand(), append([]int64{}, out...)
			if r.Intn(2) == 0 {
				a, b = b, a
			}
			lines = append(lines, fmt.Sprintf("Add-14 %s, %s", dims(a), dims(b)),
				fmt.Sprintf("Mul-14 %s, %s", dims(operand()), dims(out)),
				fmt.Sprintf("Where-16 bool%s, %s, %s", strings.TrimPrefix(dims(operand()), "T"), dims(out), dims(operand())))
			axis := int64(r.Intn(2*rank) - rank)
			lines = append(lines,
				fmt.Sprintf("ReduceSum-13(keepdims=%d) %s, int64[1]=[%d]", r.Intn(2), dims(out), axis),
				fmt.Sprintf("ReduceMax-18(keepdims=0) %s, int64[1]=[%d]", dims(out), axis),
				fmt.Sprintf("Softmax-13(axis=%d) %s", axis, dims(out)),
				fmt.Sprintf("CumSum-14(reverse=%d) %s, int64=[%d]", r.Intn(2), dims(out), axis),
				fmt.Sprintf("ArgMax-13(axis=%d) %s", axis, dims(out)))
			if rank >= 2 {
				perm := r.Perm(rank)
				ps := make([]string, rank)
				for i, p := range perm {
					ps[i] = fmt.Sprint(p)
				}
				lines = append(lines, fmt.Sprintf("Transpose-13(perm=[%s]) %s", strings.Join(ps, " "), dims(out)))
			}
		}
	}
	// Empty tensors, and reductions over and across them.
	lines = append(lines,
		"Add-14 T[0,7], T[7]", "Add-14 T[3,0,5], T[1,1,5]", "ReduceSum-13 T[4,0], int64[1]=[-1]",
		"ReduceMax-18(keepdims=1) T[0,3], int64[1]=[1]", "Transpose-13 T[0,4,3]", "CumSum-14 T[5,0], int64=[0]",
		"Softmax-13 T[0,9]", "Slice-13 T[7,17], int64[1]=[5], int64[1]=[2], int64[1]=[-1]")
	return lines
}
