package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/internal/kverr"
)

// What Connect dials again: a host that did not answer in time, not one
// that answered, be it with a refusal or a hang-up.
func TestRedialable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("bootstrap HELLO: %w", kverr.ErrUnresponsive), true},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), true},
		{&net.OpError{Op: "dial", Err: timeoutError{}}, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{fmt.Errorf("bootstrap: %w", io.EOF), false},
		{&net.DNSError{Err: "no such host", Name: "nowhere.example", IsNotFound: true}, false},
		{fmt.Errorf("handshake: %w", kverr.ErrTLS), false},
		{fmt.Errorf("sasl: %w", kverr.ErrAuthenticationFailure), false},
		{fmt.Errorf("select: %w", kverr.ErrBucketNotFound), false},
		{fmt.Errorf("%w: bad option", kverr.ErrInvalidArgument), false},
		{errors.New("something else"), false},
	} {
		assert.Equal(t, tc.want, redialable(tc.err), "%v", tc.err)
	}
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestBootstrapErrorFailure(t *testing.T) {
	dial := errors.New("dial: refused")
	auth := fmt.Errorf("seed b: %w", kverr.ErrAuthenticationFailure)
	all, s, cause := (&BootstrapError{All: []error{dial, auth}}).Failure(false)
	if s != kverr.ErrAuthenticationFailure || cause != auth || len(all) != 2 {
		t.Fatalf("credentials first: got %v, %v, %v", s, cause, all)
	}
	_, s, cause = (&BootstrapError{All: []error{auth, dial}, Unusable: true, Cause: dial}).Failure(false)
	if s != kverr.ErrNoNodeAvailable || cause != dial {
		t.Fatalf("unusable config: got %v, %v", s, cause)
	}
	_, s, cause = (&BootstrapError{All: []error{dial}}).Failure(false)
	if s != kverr.ErrNoNodeAvailable || cause != dial {
		t.Fatalf("no node: got %v, %v", s, cause)
	}
	plain := fmt.Errorf("seed a: %w", kverr.ErrPlainAuthRefused)
	all, s, cause = (&BootstrapError{All: []error{plain}}).Failure(true)
	if !errors.Is(cause, kverr.ErrPlainAuthRefused) || !strings.Contains(cause.Error(), "use memcacheds:// (TLS)") ||
		all[0] != cause {
		t.Fatalf("memcached advice: got %v, %v, %v", s, cause, all)
	}
	if _, _, cause = (&BootstrapError{All: []error{plain}}).Failure(false); cause != plain {
		t.Fatalf("advice given outside memcached://: %v", cause)
	}
}
