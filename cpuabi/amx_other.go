//go:build !(linux && amd64)

package cpuabi

import "errors"

// EnableAMX fails: AMX is x86-64's, and kiln asks for it on Linux only.
func EnableAMX() error { return errors.New("AMX tiles are for x86-64 Linux") }
