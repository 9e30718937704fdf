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
