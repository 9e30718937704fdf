package diagnostics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/internal/kverr"
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

// A wait's timeout is the default when unset; a negative one, and a wait
// for offline (or a state past it), are refused as invalid arguments.
func TestWaitFor(t *testing.T) {
	d, err := WaitFor(Online, 0, time.Second)
	assert.NoError(t, err)
	assert.Equal(t, time.Second, d)
	d, err = WaitFor(Degraded, time.Minute, time.Second)
	assert.NoError(t, err)
	assert.Equal(t, time.Minute, d)
	_, err = WaitFor(Online, -time.Second, time.Second)
	assert.ErrorIs(t, err, kverr.ErrInvalidArgument)
	assert.ErrorContains(t, err, "WaitUntilReadyOptions.Timeout -1s is negative")
	for s, want := range map[State]string{Offline: "not ClusterOffline", Offline + 4: "not ClusterState(6)"} {
		_, err = WaitFor(s, 0, time.Second)
		assert.ErrorIs(t, err, kverr.ErrInvalidArgument)
		assert.ErrorContains(t, err, want, "the error names the state refused")
	}
}
