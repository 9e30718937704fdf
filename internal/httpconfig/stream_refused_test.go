package httpconfig

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// A stream whose config the sink refuses (another cluster's) ends as
// refused even when its redial period ran out meanwhile: the end is the
// refusal's, and Stream passes the node over as one that served none. It
// was reported as a stream open for the redial period "without sending a
// config" (or, after configs of its own, as one that lived and delivered),
// naming a cause that was not the stream's.
func TestStreamRefusedAsItsRedialPeriodEndsEndsAsRefused(t *testing.T) {
	clock := retry.NewFakeClock(time.Unix(1e9, 0))
	closed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"rev":1,"clusterUUID":"other"}` + "\n\n\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client closed the stream's connection
		close(closed)
	}))
	defer srv.Close()
	const period = 10 * time.Second
	c := New(Config{Bucket: "default", Clock: clock, RedialPeriod: period})
	refusal := errors.New("the config is of another cluster")
	sink := func([]byte, string, string) error {
		// The redial period ends while the sink judges the config:
		// the stream's context is ended for it (its connection closed)
		// before the sink refuses the config.
		clock.Advance(period)
		select {
		case <-closed:
		case <-time.After(guard):
			t.Fatal("the stream's redial period ended, but its connection was not closed")
		}
		return refusal
	}
	n, err := c.streamFrom(context.Background(), strings.TrimPrefix(srv.URL, "http://"), nil, sink)
	if n != 0 {
		t.Fatalf("n = %d, want 0 (the one config was refused)", n)
	}
	if !errors.Is(err, errRefused) || !errors.Is(err, refusal) {
		t.Fatalf("err = %v, want the refusal (errRefused wrapping the sink's error)", err)
	}
	if errors.Is(err, errRedial) {
		t.Fatalf("err = %v names the redial period, not the refusal", err)
	}
}
