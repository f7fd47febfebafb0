//go:build !unix

package readfile

import "os"

// openFlags: without O_NONBLOCK, the stat before the open is the check.
const openFlags = os.O_RDONLY
