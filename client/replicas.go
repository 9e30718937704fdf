package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// GetReplicaResult is a read from the active copy or a replica.
type GetReplicaResult struct {
	GetResult
	// IsReplica is false for the active copy.
	IsReplica bool
	Node      string
}

// replicaCount returns how many replicas the bucket keeps (0 in memcached
// mode).
func (c *Client) replicaCount() int {
	if t := c.topo.Load(); t != nil && t.cfg != nil && t.ketama == nil {
		return t.cfg.NumReplicas()
	}
	return 0
}

// readCopy reads copy i of key: 0 is the active copy (GET), i > 0 replica i
// (GET_REPLICA).
func (col *Collection) readCopy(ctx context.Context, key string, i int, opts *GetOptions) (GetReplicaResult, error) {
	t, s := getOpts(opts)
	req, name := memdx.NewGet(nil), "GetReplica(active)"
	if i > 0 {
		req, name = memdx.NewGetReplica(nil), "GetReplica"
	}
	o, err := col.newOp(name, kindGet, key, req, t, s)
	if err != nil {
		return GetReplicaResult{}, err
	}
	o.replica = i
	return run(ctx, o, func(o *op) GetReplicaResult {
		r := GetReplicaResult{GetResult: o.getResult(), IsReplica: i > 0}
		if o.node != nil {
			r.Node = o.node.addr
		}
		return r
	})
}

// GetAnyReplica reads the active copy and every replica at once and
// returns the first that answers. It is the one read that fans out: up to
// four goroutines for one call, which end when it returns.
func (col *Collection) GetAnyReplica(ctx context.Context, key string, opts *GetOptions) (GetReplicaResult, error) {
	n := col.c.replicaCount() + 1
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		r   GetReplicaResult
		err error
	}
	ch := make(chan answer, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			r, err := col.readCopy(ctx, key, i, opts)
			ch <- answer{r, err}
		}(i)
	}
	var errs []error
	for i := 0; i < n; i++ {
		a := <-ch
		if a.err == nil {
			cancel()
			// Drain the rest so no goroutine outlives the call.
			for j := i + 1; j < n; j++ {
				<-ch
			}
			return a.r, nil
		}
		errs = append(errs, a.err)
	}
	return GetReplicaResult{}, replicaError(key, errs)
}

// GetAllReplicas reads the active copy and every replica and returns every
// copy that answered, active first. It fails only when none answered.
func (col *Collection) GetAllReplicas(ctx context.Context, key string, opts *GetOptions) ([]GetReplicaResult, error) {
	n := col.c.replicaCount() + 1
	res := make([]GetReplicaResult, n)
	errs := make([]error, n)
	done := make(chan int, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			res[i], errs[i] = col.readCopy(ctx, key, i, opts)
			done <- i
		}(i)
	}
	for i := 0; i < n; i++ {
		<-done
	}
	var out []GetReplicaResult
	var failed []error
	for i := range res {
		if errs[i] == nil {
			out = append(out, res[i])
		} else {
			failed = append(failed, errs[i])
		}
	}
	if len(out) == 0 {
		return nil, replicaError(key, failed)
	}
	return out, nil
}

// replicaError picks the error of a replica read that found nothing:
// document not found when any copy said so, else the first error.
func replicaError(key string, errs []error) error {
	for _, e := range errs {
		if errors.Is(e, ErrDocumentNotFound) {
			return e
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return fmt.Errorf("%w: no copy of %q answered", ErrNoNodeAvailable, key)
}

// PingResult is one connection's answer to a ping.
type PingResult struct {
	Node    string
	Latency time.Duration
	Err     error
}

// Ping sends NOOP on one connection of every node in the topology and
// reports each answer and its latency. It never retries.
func (c *Client) Ping(ctx context.Context) []PingResult {
	t := c.topo.Load()
	if t == nil {
		return nil
	}
	out := make([]PingResult, 0, len(t.all))
	for _, n := range t.all {
		r := PingResult{Node: n.addr}
		cn, _, err := n.pick()
		if err != nil {
			r.Err = err
			out = append(out, r)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, c.opts.KVTimeout)
		req := memdx.NewNoop()
		start := time.Now()
		r.Err = cn.Do(pctx, &req, func(p *memdx.Packet) error { return memdx.NewStatusError(p) })
		r.Latency = time.Since(start)
		cancel()
		out = append(out, r)
	}
	return out
}
