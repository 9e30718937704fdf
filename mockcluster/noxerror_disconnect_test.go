package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A status a command's executor ends with goes through kv_engine's
// Connection::remapErrorCode (handle_executor_status in
// daemon/protocol/mcbp/executors.cc; the privilege chain's failure in
// execute_client_request_packet, daemon/mcbp_executors.cc too). For a
// client without XERROR it turns no_bucket and no_access into disconnect:
// such a client cannot know those statuses, so the server closes the
// connection instead of answering. The mock answered NO_BUCKET (a data
// command or STAT without a selected bucket) and EACCESS (VERBOSITY by a
// user without Administrator) to every client.
func TestNoXerrorClientIsDisconnectedForNoBucketAndNoAccess(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{DefaultBucket}},
	}})
	b := c.Bucket(DefaultBucket)
	login := func(t *testing.T, user, pass string, fs ...memdx.HelloFeature) *rawClient {
		cl := dialRaw(t, c.Node(0).Addr())
		if len(fs) > 0 {
			cl.hello(fs...)
		}
		if st := cl.authPlain(user, pass); st != memdx.StatusSuccess {
			t.Fatalf("auth %s: %s", user, st)
		}
		return cl
	}
	for _, tc := range []struct {
		name       string
		user, pass string
		r          func(cl *rawClient) memdx.Request
		status     memdx.Status
	}{
		{"GET without a bucket", DefaultUser, DefaultPassword,
			func(cl *rawClient) memdx.Request { return keyReq(cl, b, memdx.NewGet([]byte("k"))) }, memdx.StatusNoBucket},
		{"STAT without a bucket", DefaultUser, DefaultPassword,
			func(*rawClient) memdx.Request { return memdx.NewStat(nil) }, memdx.StatusNoBucket},
		{"SELECT_BUCKET of a bucket the user may not use", "app", "secret",
			func(*rawClient) memdx.Request { return memdx.NewSelectBucket("other") }, memdx.StatusNoAccess},
		{"VERBOSITY without Administrator", "app", "secret",
			func(*rawClient) memdx.Request {
				return memdx.Request{OpCode: memdx.OpVerbosity, Extras: []byte{0, 0, 0, 1}}
			},
			memdx.StatusNoAccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// With XERROR: the status.
			x := login(t, tc.user, tc.pass, memdx.FeatureXerror)
			if p := x.do(tc.r(x)); p.Status != tc.status {
				t.Fatalf("with XERROR: %s, want %s", p.Status, tc.status)
			}
			// Without (no HELLO at all, or one without XERROR): the
			// connection closes unanswered.
			for _, fs := range [][]memdx.HelloFeature{nil, {memdx.FeatureJSON}} {
				cl := login(t, tc.user, tc.pass, fs...)
				cl.send(tc.r(cl))
				if got := cl.expectClosed(); len(got) != 0 {
					t.Fatalf("without XERROR (HELLO %v): answered %s, want the connection closed", fs, got[0].Status)
				}
			}
		})
	}
}
