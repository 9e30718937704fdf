package kverr

import (
	"context"
	"errors"
)

// sentinelOrder is the order in which SentinelOf looks for what an error
// names: first what no retry gets past, then what ended the wait, then what
// refused the operation before it was sent.
var (
	terminalSentinels = []error{
		ErrAuthenticationFailure, ErrBucketNotFound, ErrTLS, ErrScopeNotFound, ErrCollectionNotFound,
	}
	refusalSentinels = []error{ErrFeatureNotAvailable, ErrInvalidArgument, ErrNoNodeAvailable}
)

// OutcomeError is an error that ends an operation with the outcome of a
// step it depended on (cluster's collection-id lookup): OutcomeSentinel is
// that outcome's sentinel.
type OutcomeError interface {
	error
	OutcomeSentinel() error
}

// SentinelOf is the one place that finds the sentinel an error ending an
// operation names: the Err of its *KeyValueError (when it finds none,
// client's otherSentinel names the timeout's kind, ErrAmbiguous, or the
// connection's or retry's failure: Err is never nil). In this order: what no
// retry gets past (refused credentials, bucket or TLS, a missing scope or
// collection, whether the strategy failed on it or a timeout came while it
// lasted); a timeout (nil: err matches the timeout's own sentinels,
// ErrTimeout and its variant, already); a cancellation
// (ErrRequestCanceled); a collection-id lookup's outcome (its status's
// sentinel, an OutcomeError); an argument or a feature refused (an error
// matching refusedArgument, a lower layer's error that means an argument,
// is one), or no node to carry the request. nil when err names none of
// them.
func SentinelOf(err, refusedArgument error) error {
	if err == nil {
		return nil
	}
	for _, s := range terminalSentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	switch {
	case errors.Is(err, ErrTimeout):
		return nil
	case errors.Is(err, ErrRequestCanceled), errors.Is(err, context.Canceled):
		return ErrRequestCanceled
	}
	var oe OutcomeError
	if errors.As(err, &oe) {
		return oe.OutcomeSentinel()
	}
	if refusedArgument != nil && errors.Is(err, refusedArgument) {
		return ErrInvalidArgument
	}
	for _, s := range refusalSentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}
