package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// Without a selected bucket GET_CLUSTER_CONFIG answers the cluster's global
// config only to a user with the SystemSettings privilege (kv_engine's
// get_cluster_config_executor, check_access_to_global_config in
// daemon/protocol/mcbp/cluster_config_executor.cc): another user gets
// EACCESS with XERROR, and without XERROR the server closes the
// connection. The mock's users that may use every bucket are its
// administrators; a user limited to some buckets has no SystemSettings.
// The mock gave the global config to everyone.
func TestGetClusterConfigWithoutBucketNeedsSystemSettings(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "app", Password: "secret", Buckets: []string{DefaultBucket}},
	}})
	login := func(user, pass string, fs ...memdx.HelloFeature) *rawClient {
		cl := dialRaw(t, c.Node(0).Addr())
		cl.hello(fs...)
		if st := cl.authPlain(user, pass); st != memdx.StatusSuccess {
			t.Fatalf("auth %s: %s", user, st)
		}
		return cl
	}

	admin := login(DefaultUser, DefaultPassword, memdx.FeatureXerror, memdx.FeatureJSON)
	if p := admin.do(memdx.NewGetClusterConfig()); p.Status != memdx.StatusSuccess || len(p.Value) == 0 {
		t.Fatalf("administrator: %s %q", p.Status, p.Value)
	}

	app := login("app", "secret", memdx.FeatureXerror, memdx.FeatureJSON)
	p := app.do(memdx.NewGetClusterConfig())
	expectAnswer(t, "user without SystemSettings", p, memdx.StatusNoAccess,
		"Authorization failure: can't execute GET_CLUSTER_CONFIG operation without the SystemSettings privilege")
	// With the bucket selected it gets the bucket's config.
	if st := app.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if p := app.do(memdx.NewGetClusterConfig()); p.Status != memdx.StatusSuccess || len(p.Value) == 0 {
		t.Fatalf("with the bucket: %s", p.Status)
	}

	old := login("app", "secret", memdx.FeatureJSON)
	old.send(memdx.NewGetClusterConfig())
	if got := old.expectClosed(); len(got) != 0 {
		t.Fatalf("without XERROR: answered %s, want the connection closed", got[0].Status)
	}
}
