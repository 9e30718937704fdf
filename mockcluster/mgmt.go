package mockcluster

// The cluster manager's REST config endpoints, as each node of Couchbase
// Server serves them on its mgmt port (8091) and, with TLS, its mgmtSSL
// port (18091): what libcouchbase's HTTP config provider
// (src/bucketconfig/bc_http.cc) and gocbcore's HTTP config controller
// (basehttpcfgcontroller.go) ask for when they bootstrap over HTTP.
//
//	GET /pools                                  the pools list
//	GET /pools/default                          the default pool: nodes, buckets URI
//	GET /pools/default/nodeServices             the cluster (bucketless) config
//	GET /pools/default/nodeServicesStreaming    the same, streamed
//	GET /pools/default/b/<bucket>               the bucket's terse config
//	GET /pools/default/bs/<bucket>              the same, streamed
//	GET /pools/default/buckets/<bucket>         the bucket's config, "$HOST" filled in
//	GET /pools/default/bucketsStreaming/<bucket> the same, streamed
//
// A streamed endpoint answers with chunked transfer encoding and writes the
// current config, then every newer one as it is published (rebalance steps,
// failover, node added or removed, collection changes), each followed by
// "\n\n\n\n", until the client leaves, the node stops or the bucket is
// removed (ns_server's menelaus_web handle_streaming).

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvwire/kvwire/memdx"
)

// testHookStreamLoaded, when set (by tests), runs in a config stream right
// after the config to send was loaded.
var testHookStreamLoaded func()

// streamSeparator ends each config of a streamed endpoint.
var streamSeparator = []byte("\n\n\n\n")

// mgmtRequest is one REST request being served.
type mgmtRequest struct {
	n    *Node
	w    http.ResponseWriter
	r    *http.Request
	user *user
	// down is closed when the node stops serving.
	down <-chan struct{}
}

// serveMgmt authenticates a request with HTTP Basic auth against the
// cluster's users (401 otherwise, as ns_server answers) and routes it.
// Unknown paths answer 404, methods other than GET and HEAD 405.
func (n *Node) serveMgmt(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	if !n.serving {
		n.mu.Unlock()
		http.Error(w, "node stopping", http.StatusServiceUnavailable)
		return
	}
	n.handlers.Add(1)
	down := n.down
	n.mu.Unlock()
	defer n.handlers.Done()

	name, pass, ok := r.BasicAuth()
	u := n.c.lookupUser(name)
	if !ok || u == nil || u.password != pass {
		w.Header().Set("WWW-Authenticate", `Basic realm="Couchbase Server Admin / REST"`)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	n.c.countREST(r.URL.Path)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	m := &mgmtRequest{n: n, w: w, r: r, user: u, down: down}
	m.route(r.URL.Path)
}

// route serves path.
func (m *mgmtRequest) route(path string) {
	switch path {
	case "/pools":
		m.writeJSON(m.n.c.poolsJSON())
		return
	case "/pools/default":
		m.writeJSON(m.n.c.poolDefaultJSON(m.requestHost(), m.n.id))
		return
	case "/pools/default/nodeServices":
		body, _ := m.globalConfig()
		m.writeJSON(body)
		return
	case "/pools/default/nodeServicesStreaming":
		m.stream(func() ([]byte, memdx.ClusterConfigVersion, bool) {
			body, ver := m.globalConfig()
			return body, ver, true
		})
		return
	}
	for _, ep := range []struct {
		prefix         string
		stream, fillIn bool
	}{
		{"/pools/default/b/", false, false},
		{"/pools/default/bs/", true, false},
		{"/pools/default/buckets/", false, true},
		{"/pools/default/bucketsStreaming/", true, true},
	} {
		name, ok := strings.CutPrefix(path, ep.prefix)
		if !ok || name == "" || strings.Contains(name, "/") {
			continue
		}
		b := m.bucket(name)
		if b == nil {
			return
		}
		if !ep.stream {
			m.writeJSON(m.bucketConfig(b.snap.Load(), ep.fillIn))
			return
		}
		m.stream(func() ([]byte, memdx.ClusterConfigVersion, bool) {
			if b.removed.Load() {
				return nil, memdx.ClusterConfigVersion{}, false
			}
			// One load gives both the config and its version: a config
			// published in between would otherwise be recorded as sent
			// and never written.
			snap := b.snap.Load()
			if testHookStreamLoaded != nil {
				testHookStreamLoaded()
			}
			return m.bucketConfig(snap, ep.fillIn), snap.version(), true
		})
		return
	}
	m.notFound()
}

// bucket returns the named bucket if the user may read its config, or
// answers as ns_server does and returns nil: 403 with the permission the
// user lacks (checked first, so that a user learns nothing of buckets it
// may not use), 404 when there is no such bucket or when the request's
// bucket_uuid is not the bucket's.
func (m *mgmtRequest) bucket(name string) *Bucket {
	if !m.user.mayUse(name) {
		m.w.Header().Set("Content-Type", "application/json")
		m.w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(m.w).Encode(map[string]any{
			"message":     "Forbidden. User needs the following permissions",
			"permissions": []string{"cluster.bucket[" + name + "].settings!read"},
		})
		return nil
	}
	b := m.n.c.Bucket(name)
	if b == nil {
		m.notFound()
		return nil
	}
	// A config's uri and streamingUri name the bucket's uuid: a request
	// for another (a bucket dropped and created again under the same name)
	// is not found (menelaus_web_buckets:checking_bucket_uuid).
	if q := m.r.URL.Query(); q.Has("bucket_uuid") && q.Get("bucket_uuid") != b.uuid {
		m.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		m.w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(m.w, "Bucket uuid does not match the requested.\r\n")
		return nil
	}
	return b
}

func (m *mgmtRequest) notFound() {
	http.Error(m.w, "Requested resource not found.", http.StatusNotFound)
}

// bucketConfig is the bucket's config s as this node serves it: terse, with
// the "$HOST" placeholders, or with them filled in by the host the request
// came to (what ns_server writes in the verbose endpoints for nodes known
// by a loopback address).
func (m *mgmtRequest) bucketConfig(s *bucketSnap, fillIn bool) []byte {
	body := s.json[m.n.id]
	if fillIn {
		body = bytes.ReplaceAll(body, []byte("$HOST"), []byte(m.requestHost()))
	}
	return body
}

// globalConfig is the cluster config as this node serves it, and its
// version (both from one load, so that they match).
func (m *mgmtRequest) globalConfig() ([]byte, memdx.ClusterConfigVersion) {
	g := m.n.c.global.Load()
	if g == nil {
		return nil, memdx.ClusterConfigVersion{}
	}
	return g.json[m.n.id], memdx.ClusterConfigVersion{Epoch: m.n.c.epoch, Revision: g.rev}
}

// requestHost is the host the request came to (brackets for IPv6), as
// clients reach this node.
func (m *mgmtRequest) requestHost() string {
	if h := m.n.c.opts.ConfigHost; h != "" {
		return h
	}
	if a, ok := m.r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if host, _, err := net.SplitHostPort(a.String()); err == nil {
			if strings.Contains(host, ":") {
				return "[" + host + "]"
			}
			return host
		}
	}
	return m.n.c.opts.Host
}

func (m *mgmtRequest) writeJSON(body []byte) {
	if body == nil {
		m.notFound()
		return
	}
	m.w.Header().Set("Content-Type", "application/json")
	m.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = m.w.Write(body)
}

// stream writes current()'s config, then each newer one as it is
// published, each followed by streamSeparator and flushed as one chunk,
// until current reports false (the bucket is gone), the client leaves or
// the node stops. It waits on the cluster's config-changed channel: a
// config reaches the stream as soon as it is published.
func (m *mgmtRequest) stream(current func() ([]byte, memdx.ClusterConfigVersion, bool)) {
	flusher, ok := m.w.(http.Flusher)
	if !ok {
		http.Error(m.w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	m.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	m.w.Header().Set("Cache-Control", "no-cache")
	m.w.WriteHeader(http.StatusOK)
	flusher.Flush()
	if m.r.Method == http.MethodHead {
		return
	}
	var sent memdx.ClusterConfigVersion
	first := true
	for {
		// The channel is taken before the config: a config published in
		// between closes it, and the loop reads again.
		changed := m.n.c.configChanged()
		body, ver, ok := current()
		if !ok {
			return
		}
		if body != nil && (first || newer(ver, sent)) {
			if _, err := m.w.Write(append(append(make([]byte, 0, len(body)+4), body...), streamSeparator...)); err != nil {
				return
			}
			flusher.Flush()
			sent, first = ver, false
		}
		select {
		case <-changed:
		case <-m.r.Context().Done():
			return
		case <-m.down:
			return
		}
	}
}

// poolsJSON is GET /pools: the one pool, "default", and the server's
// version, in the shape ns_server answers.
func (c *Cluster) poolsJSON() []byte {
	out, _ := json.Marshal(map[string]any{
		"isAdminCreds":          true,
		"isROAdminCreds":        false,
		"isEnterprise":          true,
		"isDeveloperPreview":    false,
		"packageVariant":        "",
		"allowedServices":       []string{"kv"},
		"pools":                 []map[string]string{{"name": "default", "uri": "/pools/default?uuid=" + c.uuid, "streamingUri": "/poolsStreaming/default?uuid=" + c.uuid}},
		"settings":              map[string]string{"maxParallelIndexers": "/settings/maxParallelIndexers?uuid=" + c.uuid, "viewUpdateDaemon": "/settings/viewUpdateDaemon?uuid=" + c.uuid},
		"uuid":                  c.uuid,
		"implementationVersion": c.opts.Version,
		"componentsVersion":     map[string]string{"ns_server": c.opts.Version},
	})
	return out
}

// poolNodeJSON is one node of GET /pools/default.
type poolNodeJSON struct {
	Hostname          string         `json:"hostname"`
	ThisNode          bool           `json:"thisNode,omitempty"`
	ClusterMembership string         `json:"clusterMembership"`
	Status            string         `json:"status"`
	Version           string         `json:"version"`
	Services          []string       `json:"services"`
	Ports             map[string]int `json:"ports"`
}

// poolDefaultJSON is GET /pools/default as node thisNode answers it: the
// nodes (failed-over ones as inactiveFailed), with host the host the
// request came to, and the buckets' URI.
func (c *Cluster) poolDefaultJSON(host string, thisNode int) []byte {
	c.mu.Lock()
	var nodes []poolNodeJSON
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		pn := poolNodeJSON{Hostname: host + ":" + strconv.Itoa(n.mgmtPortNamed()), ClusterMembership: "active",
			Status: "healthy", Version: c.opts.Version, Services: []string{"kv"},
			Ports: map[string]int{"direct": n.kvPort}, ThisNode: n.id == thisNode}
		if n.failedOver {
			pn.ClusterMembership = "inactiveFailed"
		}
		if n.mgmtTLSPort != 0 {
			pn.Ports["httpsMgmt"] = n.mgmtTLSPort
		}
		nodes = append(nodes, pn)
	}
	rebalance := "none"
	if c.rebalance != nil {
		rebalance = "running"
	}
	c.mu.Unlock()
	out, _ := json.Marshal(map[string]any{
		"name":            "default",
		"clusterName":     c.name,
		"nodes":           nodes,
		"buckets":         map[string]string{"uri": "/pools/default/buckets?uuid=" + c.uuid},
		"rebalanceStatus": rebalance,
		"balanced":        rebalance == "none",
	})
	return out
}

// httpErrorLog sends the REST servers' own errors (TLS handshakes that
// fail, for instance) to Options.Logf, or nowhere.
func (c *Cluster) httpErrorLog() *log.Logger {
	return log.New(logfWriter{c}, "", 0)
}

type logfWriter struct{ c *Cluster }

func (w logfWriter) Write(p []byte) (int, error) {
	w.c.logf("mockcluster: http: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}
