package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// srvResolver answers SRV lookups from a table (Options.Resolver), and
// records each name asked and the deadline it was given.
type srvResolver struct {
	records map[string][]*net.SRV
	mu      sync.Mutex
	asked   []string
	dl      []time.Time
}

func (r *srvResolver) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	dl, _ := ctx.Deadline()
	r.mu.Lock()
	r.asked, r.dl = append(r.asked, name), append(r.dl, dl)
	r.mu.Unlock()
	if srv, ok := r.records[name]; ok && service == "" && proto == "" {
		return name, srv, nil
	}
	return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// srvOf is the SRV record listing addrs ("host:port").
func srvOf(t *testing.T, addrs []string) []*net.SRV {
	var out []*net.SRV
	for _, a := range addrs {
		h, p, err := net.SplitHostPort(a)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		out = append(out, &net.SRV{Target: h + ".", Port: uint16(port)})
	}
	return out
}

// couchbase://NAME with one host and no port: the seeds are the targets of
// _couchbase._tcp.NAME (couchbases:// looks up _couchbases._tcp.NAME),
// looked up once, within half of the connect timeout.
func TestDNSSRVSeeds(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	r := &srvResolver{records: map[string][]*net.SRV{"_couchbase._tcp.cluster.test": srvOf(t, []string{mc.Node(1).Addr()})}}
	start := time.Now()
	c, err := connectString(t, "couchbase://cluster.test/default", &Options{Resolver: r, ConnectTimeout: 10 * time.Second})
	require.NoError(t, err)
	_, err = c.DefaultCollection().Upsert(context.Background(), "srv", []byte("v"), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"_couchbase._tcp.cluster.test"}, r.asked)
	assert.False(t, r.dl[0].After(start.Add(5*time.Second+time.Second)), "the lookup's deadline %v is past half of the connect timeout", r.dl[0].Sub(start))
	assert.Len(t, c.Nodes(), 2, "the other node found from the config")
}

// A name without the record is dialed as written; when that fails too, the
// error names the record and why it gave no seeds (ConnectError.SRV).
// enable_dns_srv=false looks nothing up.
func TestDNSSRVFallbackAndOff(t *testing.T) {
	r := &srvResolver{}
	dead := closedPort(t)
	_, port, _ := net.SplitHostPort(dead)
	_, err := connectString(t, "couchbase://localhost/default", &Options{Resolver: r, ConnectTimeout: time.Hour})
	require.Error(t, err)
	var ce *ConnectError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, []string{"localhost:11210"}, ce.Hosts)
	require.Error(t, ce.SRV)
	assert.Contains(t, err.Error(), "_couchbase._tcp.localhost")
	assert.Contains(t, err.Error(), "no such host")

	r.asked = nil
	_, err = connectString(t, "couchbases://localhost/default?enable_dns_srv=false", &Options{Resolver: r, ConnectTimeout: time.Hour})
	require.Error(t, err)
	assert.Empty(t, r.asked, "enable_dns_srv=false")
	require.True(t, errors.As(err, &ce))
	assert.NoError(t, ce.SRV)

	// A port, or a second host, is no SRV name.
	_, err = connectString(t, "couchbase://localhost:"+port+"/default", &Options{Resolver: r, ConnectTimeout: time.Hour})
	require.Error(t, err)
	assert.Empty(t, r.asked)
}

// When the SRV record gave the seeds and none of them could be reached,
// ConnectError names the seeds dialed (the record's targets), not the
// name looked up with a port that was never dialed: a Capella name
// (cb.<id>.cloud.couchbase.com) has no address record of its own.
func TestDNSSRVConnectErrorNamesTheTargets(t *testing.T) {
	dead := closedPort(t)
	r := &srvResolver{records: map[string][]*net.SRV{"_couchbase._tcp.cluster.test": srvOf(t, []string{dead})}}
	_, err := connectString(t, "couchbase://cluster.test/default", &Options{Resolver: r, ConnectTimeout: time.Hour})
	require.Error(t, err)
	var ce *ConnectError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, []string{dead}, ce.Hosts)
	assert.NoError(t, ce.SRV, "the lookup gave the seeds")
	assert.NotContains(t, err.Error(), "cluster.test:11210", "never dialed")
}

// couchbases://NAME looks up _couchbases._tcp.NAME only, and each target is
// dialed over TLS with its own name as the server name: the certificate
// is checked against the node's name (localhost here), not against NAME,
// which no node's certificate carries.
func TestDNSSRVTLS(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, TLS: true})
	_, port, err := net.SplitHostPort(mc.TLSAddrs()[0])
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	r := &srvResolver{records: map[string][]*net.SRV{
		"_couchbases._tcp.cluster.test": {{Target: "localhost.", Port: uint16(p)}},
		"_couchbase._tcp.cluster.test":  srvOf(t, []string{closedPort(t)}),
	}}
	c, err := connectString(t, "couchbases://cluster.test/default", &Options{Resolver: r, TLSConfig: &tls.Config{RootCAs: mc.RootCAs()}})
	require.NoError(t, err)
	_, err = c.DefaultCollection().Upsert(context.Background(), "srv-tls", []byte("v"), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"_couchbases._tcp.cluster.test"}, r.asked)
}

// ctxResolver answers nothing: each lookup waits for its context to end,
// and keeps the context's deadline.
type ctxResolver struct {
	mu sync.Mutex
	dl []time.Time
}

func (r *ctxResolver) LookupSRV(ctx context.Context, _, _, name string) (string, []*net.SRV, error) {
	dl, _ := ctx.Deadline()
	r.mu.Lock()
	r.dl = append(r.dl, dl)
	r.mu.Unlock()
	<-ctx.Done()
	return "", nil, &net.DNSError{Err: ctx.Err().Error(), Name: name, IsTimeout: true}
}

// The lookup is bounded by Connect's own context when it ends before
// ConnectTimeout: it gets half of what that context has left, not half of
// ConnectTimeout, so that the name's dials have the other half; a
// resolver that never answers makes Connect fail with the lookup's
// reason, not hang.
func TestDNSSRVBoundedByConnectContext(t *testing.T) {
	r := &ctxResolver{}
	o := testOptions(&Options{Resolver: r, ConnectTimeout: time.Hour, Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err := Connect(ctx, "couchbase://localhost/default", o)
	end := time.Now()
	require.Error(t, err)
	require.Len(t, r.dl, 1)
	// The lookup began between start and end, with half of what was
	// left: its deadline is between the midpoints.
	mid := func(a time.Time) time.Time { return a.Add(deadline.Sub(a) / 2) }
	assert.False(t, r.dl[0].Before(mid(start)), "lookup deadline %v before the midpoint of %v..%v", r.dl[0], start, deadline)
	assert.False(t, r.dl[0].After(mid(end)), "lookup deadline %v after the midpoint of %v..%v", r.dl[0], end, deadline)
	var ce *ConnectError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Contains(t, err.Error(), "_couchbase._tcp.localhost")
}

// A record whose only target is "." says the service is not available at
// the name (RFC 2782): Connect's error says so, not that the record lists
// no target.
func TestDNSSRVServiceNotAvailable(t *testing.T) {
	r := &srvResolver{records: map[string][]*net.SRV{"_couchbase._tcp.localhost": {{Target: ".", Port: 0}}}}
	_, err := connectString(t, "couchbase://localhost/default?connect_timeout=2s", &Options{Resolver: r})
	require.Error(t, err)
	var ce *ConnectError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Error(t, ce.SRV)
	assert.Contains(t, err.Error(), `DNS SRV record _couchbase._tcp.localhost says the service is not available at this domain (its target is ".", RFC 2782)`)
}
