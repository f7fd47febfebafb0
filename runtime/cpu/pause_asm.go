//go:build amd64 || arm64

package cpu

// pause tells the core that this is a spin-wait loop (PAUSE, YIELD): it
// saves power and yields the core's pipeline to a hyperthread sibling.
func pause()
