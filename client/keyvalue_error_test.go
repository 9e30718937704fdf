package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// KeyValueError.RetryAttempts is the number of retries, and the message says
// that number.
func TestKeyValueErrorMessageCountsTheRetriesAttemptsCounts(t *testing.T) {
	var reasons RetryReasons
	reasons = reasons.With(RetryReasonKVLocked)
	for _, c := range []struct {
		attempts int
		want     string
	}{
		{0, ""},
		{1, " after 1 retry (for [KV_LOCKED])"},
		{3, " after 3 retries (for [KV_LOCKED])"},
	} {
		e := &KeyValueError{Op: "Get", Key: "k", Err: ErrTimeout, RetryAttempts: c.attempts, RetryReasons: reasons}
		msg := e.Error()
		if c.want == "" {
			if strings.Contains(msg, "retr") || strings.Contains(msg, "attempt") {
				t.Errorf("Attempts 0: %q mentions retries", msg)
			}
			continue
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("Attempts %d: %q; want it to say %q", c.attempts, msg, c.want)
		}
	}
}

// An argument refused before sending is a *KeyValueError matching
// ErrInvalidArgument, naming the operation, key and collection.
func TestInvalidArgumentIsAKeyValueError(t *testing.T) {
	col := (&Client{opts: Options{Bucket: "b"}}).Scope("s").Collection("c")
	err := error(col.c.refused("GetAndLock", 0, col, "k", ErrInvalidArgument, fmt.Errorf("negative lock time %v", -1)))
	var kv *KeyValueError
	if !errors.As(err, &kv) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%T %v; want a *KeyValueError matching ErrInvalidArgument", err, err)
	}
	if kv.Op != "GetAndLock" || kv.Key != "k" || kv.Bucket != "b" || kv.Scope != "s" || kv.Collection != "c" ||
		kv.RetryAttempts != 0 || kv.Node != "" || kv.Ambiguous {
		t.Errorf("%+v; want op, key, bucket, scope and collection, nothing sent", kv)
	}
	if want := `GetAndLock "k": invalid argument: negative lock time -1`; err.Error() != want {
		t.Errorf("%q; want %q", err.Error(), want)
	}
}
