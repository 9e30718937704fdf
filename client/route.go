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
	if t == nil {
		return RouteInfo{}
	}
	w := t.Where(unsafe.Slice(unsafe.StringData(key), len(key)))
	ri := RouteInfo{Vbucket: w.Vbucket, Active: w.Active, Replicas: w.Replicas, HasForwardMap: w.HasForwardMap,
		ForwardActive: w.ForwardActive, ForwardReplicas: w.ForwardReplicas, Ketama: w.Ketama}
	if cfg := t.Config(); cfg != nil {
		ri.ConfigRev = configVersionOf(cfg.Version())
	}
	return ri
}
