package client

import (
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/dnssrv"
	"github.com/kvwire/kvwire/internal/httpconfig"
)

// seedResolver is the DNS SRV lookup of the connection string's host (SDK
// RFC 0011), nil when the string names none or Options.DisableDNSSRV.
func (c *Client) seedResolver(cs *ConnStr) *dnssrv.Seeds {
	if cs.SRVHost == "" || c.opts.DisableDNSSRV || c.memcached {
		return nil
	}
	port := DefaultKVPort
	if cs.Scheme.IsTLS() {
		port = DefaultKVTLSPort
	}
	s := &dnssrv.Seeds{Service: string(cs.Scheme), Host: cs.SRVHost, DefaultPort: port, Logger: c.opts.Logger}
	if c.opts.Resolver != nil {
		s.Resolver = c.opts.Resolver
	}
	return s
}

// configSources are the cluster's config sources besides the KV service:
// the cluster manager over HTTP (HTTPS with couchbases://, with the KV
// connections' TLS settings and credentials), unless BootstrapOn is cccp.
func (c *Client) configSources(cs *ConnStr) []cluster.ConfigSource {
	if c.memcached || c.opts.BootstrapOn == BootstrapOnCCCP {
		return nil
	}
	kvPort, restPort := DefaultKVPort, DefaultHTTPPort
	hc := httpconfig.Config{
		Bucket:         c.opts.Bucket,
		Username:       c.opts.Username,
		Password:       c.opts.Password,
		ConnectTimeout: c.opts.ConnectTimeout,
		UserAgent:      "kvwire/" + c.opts.ClientName,
		Clock:          c.clock,
		Logger:         c.opts.Logger,
	}
	if cs.Scheme.IsTLS() {
		kvPort, restPort = DefaultKVTLSPort, DefaultHTTPSPort
		hc.TLS = c.opts.TLSConfig
	}
	return []cluster.ConfigSource{httpconfig.NewSource(httpconfig.New(hc), cs.HTTPHosts, kvPort, restPort, cs.Scheme.IsTLS())}
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
	cfg.Conn.NoClusterConfig = cfg.NoKVConfigs
	if srv != nil {
		cfg.Resolver = srv
	}
	return cfg
}
