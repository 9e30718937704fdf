package optrace

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/internal/logreport"
	"github.com/kvwire/kvwire/internal/opreport"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

type reason string

func (r reason) String() string { return string(r) }

// An attempt its connection refused before giving it an opaque (the
// connection had closed, the context ended) was never dispatched: the
// slow-operation report's last dispatch, operation id and sockets stay
// those of the attempt that was (RFC 0067: the last dispatch span's; a
// field that does not apply is left out), rather than a 0 µs dispatch
// with operation id 0x0.
func TestUnsentAttemptIsNoDispatch(t *testing.T) {
	clock := retry.NewFakeClock(logcapture.Epoch)
	logger, logs := logcapture.New()
	th := opreport.NewThreshold("kv", time.Millisecond, logreport.Config{Message: "slow", Key: "report",
		Interval: time.Hour, Clock: clock, Logger: logger}, 10)
	var ob Observers
	ob.Init(Config{Clock: clock, Service: "kv", ErrorTypeOther: "_OTHER", Threshold: th})
	t0 := logcapture.Epoch
	var tr Trace
	ob.Begin(t.Context(), &tr, NameOf("Get", memdx.OpGet), nil, nil, t0, time.Second)
	ob.Send(&tr, nil, "10.0.0.1:11210", ob.SendAt(&tr))
	ob.Ended(&tr, nil, 42, t0.Add(10*time.Millisecond))
	ob.RetryDecided(&tr)
	clock.Advance(20 * time.Millisecond)
	ob.Retried(&tr, reason("KV_LOCKED"))
	tr.Waited()
	ob.Send(&tr, nil, "10.0.0.1:11210", ob.SendAt(&tr))
	ob.Ended(&tr, nil, 0, t0.Add(25*time.Millisecond)) // refused: no opaque
	ob.End(&tr, nil, errors.New("connection closed"), 1, ob.EndAt(&tr))
	th.Close()

	e := logcapture.ParseKV(t, logcapture.Next(t, logs)).KV.TopRequests[0]
	require.Equal(t, "0x2a", e["operation_id"])
	require.Equal(t, 10000.0, e["last_dispatch_duration_us"])
	require.Equal(t, 10000.0, e["total_dispatch_duration_us"])
	require.Equal(t, 25000.0, e["total_duration_us"])
}
