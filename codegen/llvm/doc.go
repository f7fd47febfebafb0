// Package llvm writes the kernel layer's kernels (codegen/kernel) as LLVM
// IR through github.com/llir/llvm, and is the one LLVM function builder
// both code generators use (Fn: a block, the thread id and count, and
// integer arithmetic folded on constants).
//
// EmitCPU writes a kernel's loop nest under a kernel.Schedule, with
// masked tails, gathers for loads that are not contiguous along the lane
// axis, and stores that skip lanes outside the space. Expressions are
// evaluated lane-wise (emit.go): values that do not depend on the lane
// axis stay scalars. EmitGPU writes the same nest under the GPU schedule,
// the grid striding over the points. Float functions are polynomials
// (math.go) that call no library, as kernel's Numerics say.
package llvm
