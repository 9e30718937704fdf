package cluster

// Copies returns the copies of key that t's map assigns to a server: 0
// for the active copy, i for replica i. A copy whose map entry is -1 (a
// 1-replica bucket on one node, a cluster short of nodes) does not exist
// now; reading it would only retry NODE_NOT_AVAILABLE until the timeout,
// so replica reads skip it (and a replica read routed by a later map that
// has none for its copy ends: Cluster.Route). When the map assigns no copy at all (a
// failover in progress), the active copy is returned anyway: its read
// waits for a config that assigns it, as a Get does. A nil t, memcached://
// and a memcached bucket (ketama) have only the active copy.
func (t *Topology) Copies(key []byte) []int {
	if t == nil || t.Config() == nil || t.Ketama() || !t.Config().HasVbucketMap() {
		return []int{0}
	}
	cfg := t.Config()
	vb := cfg.VbucketForKey(key)
	out := make([]int, 0, cfg.NumReplicas()+1)
	for i := 0; i <= cfg.NumReplicas(); i++ {
		if s, err := cfg.VbucketServer(vb, i, false); err == nil && s >= 0 {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out
}

// Where is where a key goes by a topology's maps: its vbucket (0 for
// ketama routing), the nodes of its active copy and replicas by the
// current map ("" where the map has none), and by the forward map while a
// rebalance publishes one.
type Where struct {
	Vbucket         uint16
	Active          string
	Replicas        []string
	HasForwardMap   bool
	ForwardActive   string
	ForwardReplicas []string
	Ketama          bool
}

// Where reports where key goes by t, without sending anything.
func (t *Topology) Where(key []byte) Where {
	var w Where
	cfg := t.Config()
	if t.Ketama() {
		w.Ketama = true
		if _, n := t.KetamaServer(key); n != nil {
			w.Active = n.Addr()
		}
		return w
	}
	w.Vbucket = cfg.VbucketForKey(key)
	addr := func(forward bool, replica int) string {
		i, err := cfg.VbucketServer(w.Vbucket, replica, forward)
		if n := t.Server(i); err == nil && n != nil {
			return n.Addr()
		}
		return ""
	}
	w.Active = addr(false, 0)
	for r := 1; r <= cfg.NumReplicas(); r++ {
		w.Replicas = append(w.Replicas, addr(false, r))
	}
	if cfg.HasForwardMap() {
		w.HasForwardMap = true
		w.ForwardActive = addr(true, 0)
		for r := 1; r <= cfg.NumReplicas(); r++ {
			w.ForwardReplicas = append(w.ForwardReplicas, addr(true, r))
		}
	}
	return w
}
