package retry

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// A range-scan request written without an answer changed no data, so its
// error is not ambiguous; it is still never sent again, whatever the
// strategy says (a second create would leave the first's scan open, a
// second continue would skip a batch).
func TestScanRequestInDoubtIsNotAmbiguousNorResent(t *testing.T) {
	for _, op := range []memdx.OpCode{memdx.OpRangeScanCreate, memdx.OpRangeScanContinue, memdx.OpRangeScanCancel} {
		o, _, st := fakeSetup(op, fixed(time.Millisecond), time.Minute)
		st.MarkInDoubt()
		assert.False(t, st.Ambiguous(), op.String())
		d := o.decide(st, ReasonSocketClosedWhileInFlight, nil)
		require.Error(t, d.Err, op.String())
		assert.False(t, d.Retry, op.String())
		var nr *NotRetriedError
		require.True(t, errors.As(d.Err, &nr), op.String())
		assert.False(t, nr.Ambiguous, op.String())
		assert.False(t, errors.Is(d.Err, kverr.ErrAmbiguous), op.String())
		assert.NotContains(t, d.Err.Error(), "may have been applied")
	}
}
