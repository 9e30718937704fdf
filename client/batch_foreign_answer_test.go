package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
)

// nopObserver sees attempts and does nothing: with an Observer, a batch
// sends each key's quiet get as a request of its own (batch.start) instead
// of in a group (StartGets).
type nopObserver struct{}

func (nopObserver) AttemptStart(AttemptInfo)      {}
func (nopObserver) AttemptEnd(AttemptInfo, error) {}

// A memcached that answers each quiet get of a binary GetMany with the
// next get's opaque (the first key's value under the second key's opaque,
// and so on) would give each key the value of the key before it and report
// the first missing. The gets carry their keys (GETKQ) and the answers
// name them: an answer naming another key than its get's is a protocol
// violation that closes the connection before the NOOP after the gets can
// settle anything, so no key takes another's value or is reported missing.
// A server that lies once: every key is read, with its own value, on the
// retry. One that always lies: every key fails (retried until the
// deadline), none with a value or a miss. Both for the gets of a group
// (StartGets) and for gets sent one by one (with an Observer).
func TestGetManyMemcachedAnswerForAnotherKeyIsRefused(t *testing.T) {
	for _, path := range []string{"group", "one by one"} {
		for _, lie := range []string{"once", "always"} {
			t.Run(path+"/"+lie, func(t *testing.T) {
				p := proxied(t)
				o := &Options{Memcached: MemcachedOptions{BinaryMultiGet: true}}
				if path == "one by one" {
					o.Observer = nopObserver{}
				}
				c := textClient(t, p.Addr(), o)
				col := c.DefaultCollection()
				keys := batchKeys(t, col, "foreign", 10, 10)
				var lies atomic.Int32
				lying := atomic.Bool{}
				lying.Store(true)
				p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
					switch {
					case !lying.Load():
					case resp.OpCode == memdx.OpGetQ || resp.OpCode == memdx.OpGetKQ:
						lies.Add(1)
						r := *resp
						r.Opaque++ // the next get's
						return faultnode.Action{Send: []memdx.Packet{r}}
					case resp.OpCode == memdx.OpNoop && lie == "once":
						lying.Store(false)
					}
					return faultnode.Action{}
				})
				res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Second})
				require.NotZero(t, lies.Load(), "the server lied")
				for _, r := range res {
					if r.Err == nil {
						assert.Equal(t, "v-"+r.Key, string(r.Value), "%s has another key's value", r.Key)
						continue
					}
					assert.NotErrorIs(t, r.Err, ErrDocumentNotFound, "%s is stored", r.Key)
					if lie == "once" {
						t.Errorf("%s: %v; want its value, read again", r.Key, r.Err)
					}
				}
				if lie == "always" {
					for _, r := range res {
						require.Error(t, r.Err, r.Key)
					}
				}
			})
		}
	}
}
