//go:build unix

package readfile

import (
	"os"
	"syscall"
)

// openFlags opens without blocking: a named pipe put in a checked file's
// place would otherwise block open until a writer came. On a regular file
// O_NONBLOCK changes nothing.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
