package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// slowTranscoder takes 5 ms of the fake clock to encode.
type slowTranscoder struct{ fc *retry.FakeClock }

func (s slowTranscoder) Encode(v any) ([]byte, uint32, error) {
	s.fc.Advance(5 * time.Millisecond)
	return JSONTranscoder{}.Encode(v)
}

func (s slowTranscoder) Decode(value []byte, flags uint32, out any) error {
	return JSONTranscoder{}.Decode(value, flags, out)
}

// A typed write's encoding is its encode duration, not part of its
// dispatch: RFC 0067's dispatch runs from when the encoded request is
// sent. With no tracer (the default), the first attempt's send time was
// the operation's begin, before the encoding, so the slow-operation report
// said the 5 ms the value took to encode twice, as encoding and as time on
// the wire (the clock does not move while the mock answers here).
func TestTypedWriteEncodingIsNotDispatch(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	fc := retry.NewFakeClock(reportEpoch)
	logger, logs := newReportLog()
	o := fakeClockOptions(fc)
	o.Logger, o.Transcoder = logger, slowTranscoder{fc}
	o.ThresholdLogging = ThresholdLoggingOptions{KVThreshold: time.Millisecond}
	c := connect(t, mc, o)
	_, err := UpsertValue(context.Background(), c.DefaultCollection(), "k", map[string]int{"a": 1}, nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	e := kvEntry(t, logs.next(t, ThresholdReportMessage), "upsert")
	t.Logf("slow-operation report's upsert: %v", e)
	assert.Equal(t, 5*time.Millisecond, us(e, "total_duration_us"))
	assert.Equal(t, 5*time.Millisecond, us(e, "encode_duration_us"))
	assert.Equal(t, time.Duration(0), us(e, "last_dispatch_duration_us"), "the encoding is not on the wire")
	assert.Equal(t, time.Duration(0), us(e, "total_dispatch_duration_us"))
}
