package diagnostics

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A wait for online accepts only online; one for degraded accepts online
// and degraded; none accepts offline.
func TestReached(t *testing.T) {
	for desired, states := range map[State][]State{Online: {Online}, Degraded: {Online, Degraded}} {
		for _, s := range []State{Online, Degraded, Offline} {
			want := s == states[0] || (len(states) > 1 && s == states[1])
			assert.Equal(t, want, Reached(s, desired), "%s reached when waiting for %s", s, desired)
		}
	}
}
