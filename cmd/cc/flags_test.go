package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Numeric flags out of range are usage errors naming the flag, refused
// before any work; none is silently accepted.
func TestNumericFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "-O", "7", mlpModel}, `invalid value "7" for flag --O: want 0 or 2`},
		{[]string{"build", "-O", "1", mlpModel}, `flag --O: want 0 or 2`},
		{[]string{"build", "-O", "-2", mlpModel}, `flag --O`},
		{[]string{"test", "--rtol", "NaN", models}, `invalid value "NaN" for flag --rtol`},
		{[]string{"test", "--atol", "-1", models}, `flag --atol: want a finite number, 0 or more`},
		{[]string{"test", "--rel-l2", "-1", models}, `flag --rel-l2`},
		{[]string{"test", "--rel-l2", "Inf", models}, `flag --rel-l2`},
		{[]string{"test", "--jobs", "-1", models}, `invalid value "-1" for flag --jobs`},
		{[]string{"test", "--threads", "-3", models}, `flag --threads`},
		{[]string{"test", "--timeout", "-1s", models}, `--timeout must be positive`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cc(t, tc.args...)
			assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}
