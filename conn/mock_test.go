package conn

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Couchbase-side tests against the in-process mock cluster.

func newMock(t *testing.T, o mockcluster.Options) *mockcluster.Cluster {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	c, err := mockcluster.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func adminOpts(bucket string) Options {
	return Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Bucket: bucket}
}

func TestMockBootstrapEachMechanism(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addr := mc.Node(0).Addr()
	for _, mech := range []string{memdx.MechScramSHA512, memdx.MechScramSHA256, memdx.MechScramSHA1, memdx.MechPlain} {
		t.Run(mech, func(t *testing.T) {
			o := adminOpts(mockcluster.DefaultBucket)
			o.SASLMechanisms = []string{mech}
			o.AllowPlainAuthWithoutTLS = mech == memdx.MechPlain
			c := dialMemcached(t, addr, o)
			if c.Mechanism() != mech || c.Bucket() != mockcluster.DefaultBucket || c.Memcached() {
				t.Fatalf("mechanism %q bucket %q memcached %v", c.Mechanism(), c.Bucket(), c.Memcached())
			}
			// A key request works: the bucket is selected and the login
			// holds.
			k := []byte("k-" + mech)
			set := memdx.NewStore(memdx.OpSet, k, []byte("v"), 0, 0)
			set.Vbucket = mc.Bucket(mockcluster.DefaultBucket).VbucketForKey(k)
			if err := c.Do(testCtx(t), &set, nil); err != nil {
				t.Fatal(err)
			}
			doc, ok := mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", string(k))
			if !ok || string(doc.Value) != "v" {
				t.Fatalf("the mock has %q (%v)", doc.Value, ok)
			}

			wrong := o
			wrong.Password = "nope"
			_, err := Dial(testCtx(t), addr, wrong)
			var ae *AuthError
			if !errors.As(err, &ae) || ae.Status != memdx.StatusAuthError || ae.Mechanism != mech || !errors.Is(err, kverr.ErrAuthenticationFailure) {
				t.Fatalf("wrong password: %v; want an *AuthError, AUTH_ERROR, %s", err, mech)
			}
		})
	}
}

// The default preference takes the strongest SCRAM; PLAIN is never chosen
// over TCP without the opt-in, even when it is all the client lists.
func TestMockMechanismChoice(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addr := mc.Node(0).Addr()
	if c := dialMemcached(t, addr, adminOpts("")); c.Mechanism() != memdx.MechScramSHA512 {
		t.Fatalf("default mechanism %q", c.Mechanism())
	}
	o := adminOpts("")
	o.SASLMechanisms = []string{memdx.MechPlain}
	_, err := Dial(testCtx(t), addr, o)
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Mechanism != "" || ae.Status != 0 {
		t.Fatalf("PLAIN only, no TLS: %v; want an *AuthError (no common mechanism)", err)
	}
}

func TestMockErrorMapVersions(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	for _, v := range []uint16{1, 2} {
		o := adminOpts(mockcluster.DefaultBucket)
		o.errorMapVersion = v
		c := dialMemcached(t, mc.Node(0).Addr(), o)
		m := c.ErrorMap()
		if !c.Features().Has(memdx.FeatureXerror) || m == nil || m.Version != int(v) || m.Len() == 0 {
			t.Fatalf("v%d: XERROR %v, map %+v", v, c.Features().Has(memdx.FeatureXerror), m)
		}
		// The mock's test-only status is in the map.
		e, ok := m.Lookup(0x7ff0)
		if !ok || e.Name == "" {
			t.Fatalf("v%d: lookup 0x7ff0: %+v %v", v, e, ok)
		}
		if c.errMapErr != nil {
			t.Fatal(c.errMapErr)
		}
	}
}

// Without XERROR granted there is no map, even though GET_ERROR_MAP was
// pipelined.
func TestMockNoXerror(t *testing.T) {
	mc := newMock(t, mockcluster.Options{DisabledFeatures: []memdx.HelloFeature{memdx.FeatureXerror}})
	c := dialMemcached(t, mc.Node(0).Addr(), adminOpts(mockcluster.DefaultBucket))
	if c.Features().Has(memdx.FeatureXerror) || c.ErrorMap() != nil {
		t.Fatalf("features %v, map %v", c.Features(), c.ErrorMap())
	}
}

func TestMockSelectBucketRefused(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Users: []mockcluster.User{
		{Name: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Buckets: []string{"*"}},
		{Name: "limited", Password: "pw", Buckets: []string{"other"}},
	}})
	addr := mc.Node(0).Addr()
	// As kv_engine: KEY_ENOENT for a missing bucket the user may use,
	// EACCESS for one it may not.
	for name, tc := range map[string]struct {
		o  Options
		st memdx.Status
	}{
		"no such bucket": {adminOpts("nope"), memdx.StatusKeyNotFound},
		"no access":      {Options{Username: "limited", Password: "pw", Bucket: mockcluster.DefaultBucket}, memdx.StatusNoAccess},
	} {
		_, err := Dial(testCtx(t), addr, tc.o)
		var be *BucketAccessError
		if !errors.As(err, &be) || be.Bucket != tc.o.Bucket || be.Status != tc.st ||
			!errors.Is(err, kverr.ErrBucketNotFound) || !errors.Is(err, kverr.ErrBootstrap) {
			t.Fatalf("%s: %v; want a *BucketAccessError for %q with %s", name, err, tc.o.Bucket, tc.st)
		}
	}
}

func TestMockClusterConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := dialMemcached(t, mc.Node(1).Addr(), adminOpts(mockcluster.DefaultBucket))
	var cfg struct {
		Rev  int64  `json:"rev"`
		Name string `json:"name"`
		Map  struct {
			ServerList []string `json:"serverList"`
		} `json:"vBucketServerMap"`
	}
	raw := c.ClusterConfig()
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("config %q: %v", raw, err)
	}
	if cfg.Name != mockcluster.DefaultBucket || cfg.Rev != mc.Bucket(mockcluster.DefaultBucket).Rev() || len(cfg.Map.ServerList) != 2 {
		t.Fatalf("config: %+v", cfg)
	}
	raw[0] = 'X' // a copy: the connection's is unchanged
	if c.ClusterConfig()[0] != '{' {
		t.Fatal("ClusterConfig returned the connection's own slice")
	}
	if c.ServerVersion() != mockcluster.DefaultVersion {
		t.Fatalf("version %q", c.ServerVersion())
	}
	// Without a bucket: the cluster config.
	g := dialMemcached(t, mc.Node(0).Addr(), adminOpts(""))
	if g.Bucket() != "" || len(g.ClusterConfig()) == 0 {
		t.Fatalf("bucket %q, config %q", g.Bucket(), g.ClusterConfig())
	}
}

func TestMockClustermapNotifications(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	got := make(chan memdx.ClustermapNotification, 4)
	o := adminOpts(mockcluster.DefaultBucket)
	o.Features = []memdx.HelloFeature{memdx.FeatureDuplex, memdx.FeatureClustermapChangeNotification, memdx.FeatureJSON}
	o.OnClustermapNotification = func(n memdx.ClustermapNotification) {
		n.Bucket = append([]byte(nil), n.Bucket...) // valid only during the call
		n.Config = append([]byte(nil), n.Config...)
		got <- n
	}
	c := dialMemcached(t, mc.Node(0).Addr(), o)
	if !c.Features().Has(memdx.FeatureClustermapChangeNotification) {
		t.Fatalf("features %v", c.Features())
	}
	b := mc.Bucket(mockcluster.DefaultBucket)
	if _, err := b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	n := recv(t, got)
	if string(n.Bucket) != mockcluster.DefaultBucket || n.Version.Revision != b.Rev() || !json.Valid(n.Config) {
		t.Fatalf("notification %+v (rev now %d)", n, b.Rev())
	}
}

// With UnorderedExecution the server may answer out of order: a delayed
// request does not hold back the one after it.
func TestMockUnorderedExecution(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	o := adminOpts(mockcluster.DefaultBucket)
	o.Features = []memdx.HelloFeature{memdx.FeatureUnorderedExecution}
	c := dialMemcached(t, mc.Node(0).Addr(), o)
	b := mc.Bucket(mockcluster.DefaultBucket)
	for _, k := range []string{"slow", "fast"} {
		if _, err := b.Set("_default", "_default", k, []byte(k), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	mc.Control(mockcluster.Match{Key: "slow", OpCodes: []memdx.OpCode{memdx.OpGet}}, 1,
		func(r *mockcluster.Request) (mockcluster.Action, bool) {
			return mockcluster.Action{Delay: 300 * time.Millisecond}, true
		})
	get := func(k string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			var r result
			req := memdx.NewGet([]byte(k))
			req.Vbucket = b.VbucketForKey(req.Key)
			r.err = c.Do(testCtx(t), &req, func(p *memdx.Packet) error { r.value = string(p.Value); return memdx.NewStatusError(p) })
			ch <- r
		}()
		return ch
	}
	slow := get("slow")
	waitFor(t, "the slow GET in flight", func() bool { return c.Pending() == 1 })
	fast := get("fast")
	select {
	case r := <-fast:
		if r.err != nil || r.value != "fast" {
			t.Fatalf("fast: %+v", r)
		}
	case r := <-slow:
		t.Fatalf("the slow GET (%+v) came back before the fast one", r)
	}
	if r := recv(t, slow); r.err != nil || r.value != "slow" {
		t.Fatalf("slow: %+v", r)
	}
}

// A connection the server closes after applying a mutation: the request
// fails as written (the outcome is unknown to the client; the mock shows
// it was applied).
func TestMockCloseAfterApply(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := dialMemcached(t, mc.Node(0).Addr(), adminOpts(mockcluster.DefaultBucket))
	b := mc.Bucket(mockcluster.DefaultBucket)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "doomed"}, Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}, Times: 1})
	req := memdx.NewStore(memdx.OpSet, []byte("doomed"), []byte("v"), 0, 0)
	req.Vbucket = b.VbucketForKey(req.Key)
	err := c.Do(testCtx(t), &req, nil)
	if re := requestError(t, err); !re.Written || !errors.Is(err, kverr.ErrConnectionClosed) {
		t.Fatalf("Do: %v; want written, kverr.ErrConnectionClosed", err)
	}
	if _, ok := b.Get("_default", "_default", "doomed"); !ok {
		t.Fatal("the mock did not apply the SET")
	}
}

// A memcached-mode Dial (memcached://) to a Couchbase Server KV port fails
// with a *NotMemcachedError saying what gave it away: without credentials
// the EACCESS answer to its get, with them the SCRAM mechanisms the node
// lists (before any password is sent, PLAIN allowed or not).
func TestMemcachedModeRefusesACouchbaseNode(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	addr := mc.Node(0).Addr()
	for name, o := range map[string]Options{
		"no credentials":             {Memcached: true},
		"credentials":                {Memcached: true, Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword},
		"credentials, PLAIN allowed": {Memcached: true, Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, AllowPlainAuthWithoutTLS: true},
	} {
		t.Run(name, func(t *testing.T) {
			auths := mc.RequestCount(memdx.OpSASLAuth)
			c, err := Dial(testCtx(t), addr, o)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			var nm *NotMemcachedError
			if !errors.As(err, &nm) || nm.Addr != addr || !errors.Is(err, kverr.ErrBootstrap) {
				t.Fatalf("err %v (%T), want a *NotMemcachedError for %s", err, err, addr)
			}
			want := "EACCESS"
			if o.Username != "" {
				want = "SCRAM-SHA512"
				if n := mc.RequestCount(memdx.OpSASLAuth) - auths; n != 0 {
					t.Errorf("%d SASL_AUTH sent to a Couchbase node in memcached mode", n)
				}
			}
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Couchbase Server KV port, not memcached") {
				t.Errorf("error %q does not say %s gave it away", err, want)
			}
		})
	}
}

// GET_CLUSTER_CONFIG's answer at bootstrap: a config, or the status that
// says why there is none (KEY_ENOENT on a memcached bucket, whose config
// the cluster manager serves over HTTP); NoClusterConfig leaves it out.
func TestBootstrapClusterConfigStatus(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket, NumVbuckets: 16}, {Name: "cache", Type: mockcluster.MemcachedBucket}}})
	addr := mc.Node(0).Addr()
	for _, tc := range []struct {
		bucket   string
		noConfig bool
		status   memdx.Status
		config   bool
	}{
		{mockcluster.DefaultBucket, false, memdx.StatusSuccess, true},
		{"cache", false, memdx.StatusKeyNotFound, false},
		{mockcluster.DefaultBucket, true, 0, false},
	} {
		asked := mc.RequestCount(memdx.OpGetClusterConfig)
		o := adminOpts(tc.bucket)
		o.NoClusterConfig = tc.noConfig
		c, err := Dial(testCtx(t), addr, o)
		if err != nil {
			t.Fatalf("%s: %v", tc.bucket, err)
		}
		if c.ClusterConfigStatus() != tc.status || (c.ClusterConfig() != nil) != tc.config {
			t.Errorf("%s (NoClusterConfig %v): status %s, config %d bytes", tc.bucket, tc.noConfig, c.ClusterConfigStatus(), len(c.ClusterConfig()))
		}
		if n := mc.RequestCount(memdx.OpGetClusterConfig) - asked; (n == 0) != tc.noConfig {
			t.Errorf("%s (NoClusterConfig %v): %d GET_CLUSTER_CONFIG sent", tc.bucket, tc.noConfig, n)
		}
		c.Close()
	}
}
