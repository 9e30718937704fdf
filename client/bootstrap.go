package client

import (
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/connstr"
	"github.com/kvwire/kvwire/internal/dnssrv"
	"github.com/kvwire/kvwire/internal/httpconfig"
)

// seedResolver is the DNS SRV lookup of the connection string's host (SDK
// RFC 0011), nil when the string names none or Options.DisableDNSSRV.
func (c *Client) seedResolver(cs *ConnStr) *dnssrv.Seeds {
	if c.opts.DisableDNSSRV || c.memcached {
		return nil
	}
	return dnssrv.ForConnStr(cs.internal(), c.opts.Resolver, c.opts.Logger)
}

// configSources are the cluster's config sources besides the KV service:
// the cluster manager over HTTP (HTTPS with couchbases://, with the KV
// connections' TLS settings and credentials), unless BootstrapOn is cccp.
func (c *Client) configSources(cs *ConnStr) []cluster.ConfigSource {
	if c.memcached || c.opts.BootstrapOn == BootstrapOnCCCP {
		return nil
	}
	scheme := connstr.Scheme(cs.Scheme)
	hc := httpconfig.Config{
		Bucket:         c.opts.Bucket,
		Username:       c.opts.Username,
		Password:       c.opts.Password,
		ConnectTimeout: c.opts.ConnectTimeout,
		// One agent (RFC 0034's SDK identifier: HELLO's, the
		// User-Agent, the diagnostics report's sdk).
		UserAgent: c.opts.ClientName,
		Clock:     c.clock,
		Logger:    c.opts.Logger,
	}
	if cs.Scheme.IsTLS() {
		hc.TLS = c.opts.TLSConfig
	}
	src := httpconfig.NewSource(httpconfig.New(hc), cs.HTTPHosts, scheme.KVPort(), scheme.HTTPPort(), scheme.IsTLS())
	src.RESTAddr = c.opts.restAddr
	return []cluster.ConfigSource{src}
}

// clusterConfig is what the cluster is given: the seeds, the client's
// settings, srv (nil: no DNS SRV lookup) and the HTTP config source.
func (c *Client) clusterConfig(cs *ConnStr, srv *dnssrv.Seeds) cluster.Config {
	o := &c.opts
	cfg := cluster.Config{
		Seeds:               cs.Hosts,
		Memcached:           c.memcached,
		TLS:                 cs.Scheme.IsTLS(), // resolved refused TLS settings elsewhere
		Bucket:              o.Bucket,
		Network:             o.Network,
		ConnectTimeout:      o.ConnectTimeout,
		KVTimeout:           o.KVTimeout,
		PollInterval:        o.ConfigPollInterval,
		StrandGrace:         o.HealthCheck.ProbeTimeout,
		ConnectionsPerNode:  o.ConnectionsPerNode,
		Conn:                c.connOptions(),
		RemoveFailedServers: o.Memcached.RemoveFailedServers,
		ServerFailureLimit:  o.Memcached.ServerFailureLimit,
		Clock:               c.clock,
		Logger:              o.Logger,
		NodeError:           func(addr string, err error) error { return &NodeError{Addr: addr, Err: err} },
		Sources:             c.configSources(cs),
		NoKVConfigs:         o.BootstrapOn == BootstrapOnHTTP,
		BeforeParse:         testHookParse,
	}
	// With NoKVConfigs the connections still ask for the node's config at
	// bootstrap (pipelined: no round trip more), by which cluster.Node.vet
	// refuses a connection to another cluster's node at a node's address.
	if srv != nil {
		cfg.Resolver = srv
	}
	return cfg
}
