package cpuabi

// Trial is compiled code for a compiler's tuner to time on this machine:
// codegen/cpu compiles the candidates, and a loader it is given (runtime/cpu's
// TimeRuns) runs them, so the compiler loads no code itself.
type Trial struct {
	// Code is the shared object; Weights its stored weights and Derived
	// the ranges the loader computes (as in an engine's code section).
	Code    []byte
	Weights []byte
	Derived []Derived
	// ArenaBytes is the arena the code needs.
	ArenaBytes int64
	// IO are the buffers bound to kiln_run's io slots, in slot order: the
	// inputs the code reads, the outputs it writes.
	IO [][]byte
	// Footprint is the bytes of weights the code would find beside it in a
	// whole model: the runs rotate through copies of the live weights that
	// add up to it, so each finds them as warm or cold as there.
	Footprint int64
	// Warmups runs come first and are not timed; of the Runs after them,
	// on one thread, the fastest counts (other work on the machine only
	// ever slows a run down).
	Warmups, Runs int
}
