package client

import "unsafe"

// RouteInfo says where a key goes under the config in use.
type RouteInfo struct {
	// Vbucket is the key's vbucket (0 for ketama routing).
	Vbucket uint16
	// Active is the node holding the active copy by the current map;
	// Replicas the replica nodes in order ("" where the map has none).
	Active   string
	Replicas []string
	// ForwardActive is the active node by vBucketMapForward, while a
	// rebalance publishes one (HasForwardMap); ForwardReplicas likewise.
	HasForwardMap   bool
	ForwardActive   string
	ForwardReplicas []string
	// Ketama is true for memcached buckets and memcached:// servers.
	Ketama bool
	// ConfigRev is the revision of the config consulted.
	ConfigRev ConfigVersion
}

// Route reports where key would be sent now, without sending anything:
// the vbucket and nodes by the current and, during a rebalance, the forward
// map. The key is the document key, without collection prefix.
func (c *Client) Route(key string) RouteInfo {
	t := c.cl.Topology()
	var ri RouteInfo
	if t == nil {
		return ri
	}
	k := unsafe.Slice(unsafe.StringData(key), len(key))
	cfg := t.Config()
	if cfg != nil {
		ri.ConfigRev = configVersionOf(cfg.Version())
	}
	if t.Ketama() {
		ri.Ketama = true
		if _, n := t.KetamaServer(k); n != nil {
			ri.Active = n.Addr()
		}
		return ri
	}
	ri.Vbucket = cfg.VbucketForKey(k)
	addr := func(forward bool, replica int) string {
		i, err := cfg.VbucketServer(ri.Vbucket, replica, forward)
		if n := t.Server(i); err == nil && n != nil {
			return n.Addr()
		}
		return ""
	}
	ri.Active = addr(false, 0)
	for r := 1; r <= cfg.NumReplicas(); r++ {
		ri.Replicas = append(ri.Replicas, addr(false, r))
	}
	if cfg.HasForwardMap() {
		ri.HasForwardMap = true
		ri.ForwardActive = addr(true, 0)
		for r := 1; r <= cfg.NumReplicas(); r++ {
			ri.ForwardReplicas = append(ri.ForwardReplicas, addr(true, r))
		}
	}
	return ri
}
