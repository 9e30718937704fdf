package kverr

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type outcome struct{ s error }

func (o *outcome) Error() string          { return "lookup: " + o.s.Error() }
func (o *outcome) OutcomeSentinel() error { return o.s }

func TestSentinelOfOrder(t *testing.T) {
	replica := errors.New("replica index out of range")
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"nil", nil, nil},
		{"terminal before timeout", errors.Join(ErrTimeout, ErrBucketNotFound), ErrBucketNotFound},
		{"timeout names none", fmt.Errorf("wait: %w", ErrTimeout), nil},
		{"canceled", context.Canceled, ErrRequestCanceled},
		{"lookup outcome", fmt.Errorf("op: %w", &outcome{ErrCollectionNotFound}), ErrCollectionNotFound},
		{"refused argument", fmt.Errorf("route: %w", replica), ErrInvalidArgument},
		{"refusal", errors.Join(errors.New("x"), ErrNoNodeAvailable), ErrNoNodeAvailable},
		{"none", errors.New("other"), nil},
	} {
		if got := SentinelOf(c.err, replica); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
