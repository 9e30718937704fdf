package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// diag prints a line per connection and the cluster's state, exit 0 when
// every node is connected; --json holds RFC 0061's report under
// "diagnostics". A stopped node's connection is reconnecting, with why,
// the cluster degraded and the exit status 1; --wait gives up at its
// timeout naming the node; --degraded is satisfied by the others.
func TestDiag(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{Nodes: 2})
	r := runKV(t, env, "", "diag")
	require.Equal(t, exitOK, r.code, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	for _, l := range lines[:2] {
		assert.Regexp(t, `^127\.0\.0\.1:\d+/0 +connected +local 127\.0\.0\.1:\d+  id [0-9A-F]{16}/[0-9a-f]{16}  active .* ago$`, l)
	}
	assert.Equal(t, "cluster online (2 endpoints)", lines[2])

	r = runKV(t, env, "", "diag", "--json")
	require.Equal(t, exitOK, r.code, r)
	var res struct {
		Op          string `json:"op"`
		OK          bool   `json:"ok"`
		Diagnostics struct {
			Version  int    `json:"version"`
			SDK      string `json:"sdk"`
			State    string `json:"state"`
			Services map[string][]map[string]any
		} `json:"diagnostics"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	assert.Equal(t, "diag", res.Op)
	assert.True(t, res.OK)
	assert.Equal(t, 2, res.Diagnostics.Version)
	assert.Equal(t, "kvcli", res.Diagnostics.SDK)
	assert.Equal(t, "online", res.Diagnostics.State)
	require.Len(t, res.Diagnostics.Services["kv"], 2)
	for _, e := range res.Diagnostics.Services["kv"] {
		assert.Equal(t, "connected", e["state"])
		assert.Equal(t, mockcluster.DefaultBucket, e["namespace"])
		assert.Contains(t, e, "last_activity_us")
	}

	down := mc.Node(1).Addr()
	mc.Node(1).Stop()
	r = runKV(t, env, "", "diag")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(down)+`/0 +(connecting|reconnecting) .*connection refused$`), r.stdout)
	assert.Contains(t, r.stdout, "cluster degraded (2 endpoints)")

	r = runKV(t, env, "", "diag", "--wait", "300ms", "--json")
	assert.Equal(t, exitError, r.code, r)
	var failed struct {
		OK    bool `json:"ok"`
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
		Diagnostics json.RawMessage `json:"diagnostics"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &failed), r.stdout)
	assert.False(t, failed.OK)
	assert.Equal(t, "timeout", failed.Error.Kind)
	assert.NotEmpty(t, failed.Diagnostics)
	assert.Contains(t, r.stderr, down)

	r = runKV(t, env, "", "diag", "--wait", "10s", "--degraded")
	assert.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "cluster degraded (2 endpoints)")

	r = runKV(t, env, "", "diag", "--degraded")
	assert.Equal(t, exitUsage, r.code, r)
}

// ping --json says each node's state as RFC 0034 names it and the
// connection it went on.
func TestPingJSONNamesTheConnection(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{Nodes: 1})
	r := runKV(t, env, "", "ping", "--json")
	require.Equal(t, exitOK, r.code, r)
	var res struct {
		Ping []map[string]any `json:"ping"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.Len(t, res.Ping, 1)
	p := res.Ping[0]
	assert.Equal(t, "ok", p["state"])
	assert.Equal(t, p["node"], p["remote"])
	assert.Regexp(t, `^127\.0\.0\.1:\d+$`, p["local"])
	assert.Regexp(t, `^[0-9A-F]{16}/[0-9a-f]{16}$`, p["local_id"])
}

// ping --json also carries the SDKs' ping report (RFC 0034/0061, version
// 2) under "report", so that tools reading SDK ping reports read kvcli's:
// its id (--report-id), config_rev, sdk, and each kv endpoint's state and
// integer latency_us.
func TestPingJSONCarriesTheRFCReport(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{Nodes: 1})
	r := runKV(t, env, "", "ping", "--json", "--report-id", "probe-7")
	require.Equal(t, exitOK, r.code, r)
	var res struct {
		Report struct {
			Version   int     `json:"version"`
			ID        string  `json:"id"`
			ConfigRev *uint64 `json:"config_rev"`
			SDK       string  `json:"sdk"`
			Services  map[string][]struct {
				ID        string  `json:"id"`
				LatencyUs *uint64 `json:"latency_us"`
				Remote    string  `json:"remote"`
				State     string  `json:"state"`
				Namespace string  `json:"namespace"`
			} `json:"services"`
		} `json:"report"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	rep := res.Report
	assert.Equal(t, 2, rep.Version, r.stdout)
	assert.Equal(t, "probe-7", rep.ID)
	assert.NotNil(t, rep.ConfigRev)
	assert.NotEmpty(t, rep.SDK)
	require.Len(t, rep.Services["kv"], 1, r.stdout)
	kv := rep.Services["kv"][0]
	assert.Equal(t, "ok", kv.State)
	assert.NotNil(t, kv.LatencyUs)
	assert.Equal(t, mockcluster.DefaultBucket, kv.Namespace)
	assert.Regexp(t, `/0$`, kv.ID)
}

// ping takes -t as its timeout even when the connection string carries a
// kv_timeout, as every other command does: -t wins. The NOOP's answer is
// held past -t (and answered within kv_timeout): the ping must time out
// at -t, not wait for the connection string's timeout.
func TestPingTimeoutFlagWinsOverKVTimeout(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{Nodes: 1})
	env = with(env, envConnStr, env[envConnStr]+"?kv_timeout=30s")
	h := mc.AddFault(mockcluster.Fault{
		// The bucket's connection: not the NOOP of its handshake, sent
		// before it selects the bucket.
		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpNoop}, Bucket: mockcluster.DefaultBucket},
		Action: mockcluster.Action{Delay: 3 * time.Second},
	})
	defer h.Remove()
	r := runKV(t, env, "", "ping", "--json", "-t", "100ms")
	assert.Equal(t, exitError, r.code, r)
	var res struct {
		Ping []map[string]any `json:"ping"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.Len(t, res.Ping, 1, r)
	assert.Equal(t, "timeout", res.Ping[0]["state"], r)
}

// Ctrl-C during ping or stats exits 130, as during any other command: the
// request reached the server (which holds its answer) when ctx is
// canceled.
func TestPingAndStatsInterrupted(t *testing.T) {
	for _, c := range []struct {
		args []string
		op   memdx.OpCode
	}{
		{[]string{"ping"}, memdx.OpNoop},
		{[]string{"stats"}, memdx.OpStat},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			mc, env := newMock(t, mockcluster.Options{Nodes: 1})
			arrived := make(chan struct{})
			var once sync.Once
			h := mc.AddFault(mockcluster.Fault{
				Match: mockcluster.Match{OpCodes: []memdx.OpCode{c.op}, Bucket: mockcluster.DefaultBucket,
					Func: func(*mockcluster.Request) bool { once.Do(func() { close(arrived) }); return true }},
				Action: mockcluster.Action{Delay: 20 * time.Second},
			})
			defer h.Remove()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			bg := startKvcli(ctx, append(c.args, "-t", "20s"), env)
			select {
			case <-arrived:
			case code := <-bg.done:
				t.Fatalf("exit %d before the request arrived: %s", code, bg.stderr.String())
			}
			cancel()
			select {
			case code := <-bg.done:
				assert.Equal(t, exitInterrupted, code, "stdout: %s\nstderr: %s", bg.stdout.String(), bg.stderr.String())
			case <-time.After(10 * time.Second):
				t.Fatal("it did not end on interrupt")
			}
		})
	}
}
