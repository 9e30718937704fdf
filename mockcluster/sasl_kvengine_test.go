package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

func saslCluster(t *testing.T) *Cluster {
	t.Helper()
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: "alice", Password: "secret", Buckets: []string{"*"}},
		{Name: "bob", Password: "builder", Buckets: []string{"other"}},
	}})
	if _, err := c.AddBucket(BucketOptions{Name: "other", NumVbuckets: 16}); err != nil {
		t.Fatal(err)
	}
	return c
}

// kv_engine upper-cases the mechanism name (SaslAuthCommandContext's
// getMechanism) and answers an unknown one AUTH_ERROR saying so.
func TestSASLMechanismNameIsCaseInsensitive(t *testing.T) {
	c := saslCluster(t)
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	if p := cl.do(memdx.NewSASLAuth("plain", memdx.PlainPayload("alice", "secret"))); p.Status != memdx.StatusSuccess {
		t.Fatalf("PLAIN in lower case: %s %q", p.Status, p.Value)
	}
	cl = dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	sc, err := memdx.NewScramClient(memdx.MechScramSHA256, "alice", "secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := cl.do(memdx.NewSASLAuth("scram-sha256", sc.ClientFirst()))
	if p.Status != memdx.StatusAuthContinue {
		t.Fatalf("scram-sha256: %s %q", p.Status, p.Value)
	}
	final, err := sc.ClientFinal(p.Value)
	if err != nil {
		t.Fatal(err)
	}
	if p := cl.do(memdx.NewSASLStep("scram-sha256", final)); p.Status != memdx.StatusSuccess {
		t.Fatalf("step: %s %q", p.Status, p.Value)
	}
	p = cl.do(memdx.NewSASLAuth("MD5", []byte("x")))
	if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); p.Status != memdx.StatusAuthError || !ok ||
		ec.Context != `Requested mechanism "MD5" is not supported` {
		t.Fatalf("unknown mechanism: %s %q", p.Status, p.Value)
	}
}

// While a SCRAM exchange waits for its SASL_STEP, kv_engine refuses a new
// SASL_AUTH with EINVAL and keeps the exchange (SaslStartCommandContext);
// SASL_STEP continues it whatever mechanism name it carries
// (SaslStepCommandContext uses the connection's server context), and one
// without an exchange is EINVAL.
func TestSASLStepOrder(t *testing.T) {
	c := saslCluster(t)
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	sc, err := memdx.NewScramClient(memdx.MechScramSHA512, "alice", "secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := cl.do(memdx.NewSASLAuth(memdx.MechScramSHA512, sc.ClientFirst()))
	if p.Status != memdx.StatusAuthContinue {
		t.Fatalf("auth: %s", p.Status)
	}
	first := p.Value
	p = cl.do(memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload("alice", "secret")))
	if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); p.Status != memdx.StatusInvalidArgs || !ok ||
		ec.Context != "Logic error: The server expects SASL STEP after returning CONTINUE from SASL START" {
		t.Fatalf("SASL_AUTH during an exchange: %s %q", p.Status, p.Value)
	}
	final, err := sc.ClientFinal(first)
	if err != nil {
		t.Fatal(err)
	}
	if p := cl.do(memdx.NewSASLStep(memdx.MechPlain, final)); p.Status != memdx.StatusSuccess {
		t.Fatalf("step under another mechanism name: %s %q", p.Status, p.Value)
	}
	p = cl.do(memdx.NewSASLStep(memdx.MechScramSHA512, final))
	if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); p.Status != memdx.StatusInvalidArgs || !ok ||
		ec.Context != "Logic error: The server expects the client to start with SASL START before sending SASL STEP" {
		t.Fatalf("step without an exchange: %s %q", p.Status, p.Value)
	}
}

// A SASL_AUTH restarts authentication (Connection::restartAuthentication):
// a failed one leaves the connection unauthenticated, with no error
// context; a successful one keeps the selected bucket when the new user
// may use it and leaves it otherwise (SaslAuthCommandContext::
// tryHandleSaslOk).
func TestSASLReauthentication(t *testing.T) {
	c := saslCluster(t)
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	if st := cl.authPlain("alice", "secret"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if st := cl.selectBucket("other"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	p := cl.do(memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload("alice", "wrong")))
	if p.Status != memdx.StatusAuthError || len(p.Value) != 0 {
		t.Fatalf("bad password: %s %q, want AUTH_ERROR and no body", p.Status, p.Value)
	}
	if p := cl.do(memdx.NewNoop()); p.Status != memdx.StatusNoAccess {
		t.Fatalf("NOOP after a failed re-authentication: %s, want EACCESS", p.Status)
	}
	// bob may use "other": the bucket stays selected.
	if st := cl.authPlain("bob", "builder"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if p := cl.do(memdx.NewCollectionsGetManifest()); p.Status != memdx.StatusSuccess {
		t.Fatalf("bucket after re-authentication as a user of it: %s", p.Status)
	}
	// alice may too; then bob on the default bucket he may not use.
	if st := cl.authPlain("alice", "secret"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if st := cl.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if st := cl.authPlain("bob", "builder"); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if p := cl.do(memdx.NewCollectionsGetManifest()); p.Status != memdx.StatusNoBucket {
		t.Fatalf("bucket after re-authentication as a user without access: %s, want NO_BUCKET", p.Status)
	}
}
