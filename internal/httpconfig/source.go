package httpconfig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/vbmap"
)

// Source is the cluster manager as the cluster's config source
// (cluster.FirstConfigSource): it serves the bootstrap config from the
// first REST seed that has it, and then streams the configs from the
// config's nodes.
type Source struct {
	c *Client
	// seeds are the REST addresses given (host:port=http); a KV seed at
	// kvPort is also asked on its host's restPort.
	seeds            []string
	kvPort, restPort int
	tls              bool
	// RESTAddr, when set (before FirstConfig and Run), gives the REST
	// address of a KV address in place of the convention restAddr
	// follows (tests: a mock cluster's nodes listen on ports of their
	// own).
	RESTAddr func(kv string) (string, bool)
}

// NewSource returns the source of c: seeds are the REST addresses given,
// kvPort and restPort the scheme's default KV and REST ports (a KV seed at
// kvPort, the cluster's usual layout, is asked on its host's restPort),
// tls whether the REST ports to stream from are the HTTPS ones.
func NewSource(c *Client, seeds []string, kvPort, restPort int, tls bool) *Source {
	return &Source{c: c, seeds: seeds, kvPort: kvPort, restPort: restPort, tls: tls}
}

// addrs are the REST addresses to bootstrap from: the seeds given, then
// those of the KV seeds at the default KV port.
func (s *Source) addrs(kvSeeds []string) []string {
	out := slices.Clone(s.seeds)
	for _, kv := range kvSeeds {
		if a, ok := s.restAddr(kv); ok && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// restAddr is the REST address of the KV address kv: its host's restPort
// when kv is at kvPort (a node's usual layout: 11210 and 8091, or 11207
// and 18091 with TLS); none at another port, whose node's REST port no
// convention tells.
func (s *Source) restAddr(kv string) (string, bool) {
	if s.RESTAddr != nil {
		return s.RESTAddr(kv)
	}
	host, port, err := net.SplitHostPort(kv)
	if err != nil || port != strconv.Itoa(s.kvPort) {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(s.restPort)), true
}

// CanServe reports whether there is a REST address to ask: an =http seed,
// or a KV seed at the default KV port.
func (s *Source) CanServe(kvSeeds []string) bool { return len(s.addrs(kvSeeds)) > 0 }

// FirstConfig fetches the bucket's config from the REST seeds in turn,
// each within an equal share of the time ctx has left for those still to
// ask, and returns the first valid one served (a seed whose answer does
// not parse as a config is passed over). Refused credentials or bucket end
// it at once (every node would answer the same). Its error names every
// address asked and why each gave none.
func (s *Source) FirstConfig(ctx context.Context, kvSeeds []string) (cluster.SourcedConfig, error) {
	addrs := s.addrs(kvSeeds)
	if len(addrs) == 0 {
		return cluster.SourcedConfig{}, errors.New("no cluster manager address to read the config from: give its REST port as host:port=http")
	}
	var errs []error
	for i, addr := range addrs {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			actx, cancel = context.WithTimeout(ctx, time.Until(dl)/time.Duration(len(addrs)-i))
		}
		raw, host, err := s.c.Fetch(actx, addr)
		cancel()
		if err == nil {
			// A 200 that is not a config (a web page in front of
			// the port, a cut body) is this seed's failure, not the
			// bootstrap's: the next seed is asked, as after a KV
			// seed's config that does not parse.
			if _, perr := vbmap.Parse(raw, host); perr != nil {
				err = &Error{Addr: addr, Path: s.c.bucketPath(false), Err: fmt.Errorf("the answer is not a valid config: %w", perr)}
			}
		}
		if err == nil {
			return cluster.SourcedConfig{Raw: raw, Host: host, From: addr}, nil
		}
		errs = append(errs, err)
		if errors.Is(err, kverr.ErrAuthenticationFailure) || errors.Is(err, kverr.ErrBucketNotFound) || ctx.Err() != nil {
			break
		}
	}
	return cluster.SourcedConfig{}, fmt.Errorf("no config from the cluster manager: %w", errors.Join(errs...))
}

// Run streams the configs into sink until ctx ends, from the REST
// addresses of the nodes of the config in use on the cluster's network
// (the REST seeds while it names none), or of a newer config the stream
// delivered that the cluster may yet install (Sink.OnItsWay: not one it
// refused), and then of the seeds a DNS SRV record gave when looked up
// again (Sink.SeedsLookedUp: their REST addresses, as at bootstrap), which
// the cluster has looked up while no node serves a stream
// (Sink.SourceUnreachable, told after each round of the stream in which
// none did): every node the config names may be gone, the cluster moved
// to addresses only the record names. Those are streamed from after such
// a round only, until a node the config names serves again. A node that
// streams another cluster's configs (its address given to another
// cluster's node) is passed over for the next, its configs not offered;
// so is a seed looked up again, that no config names, streaming another
// bucket of the same name (Sink.LookedUpForeign: another bucket uuid).
// While the stream waits to be reopened after a stream that delivered, a
// config the cluster wants (Sink.ConfigWanted: a NOT_MY_VBUCKET without
// one, or a node's KV connection lost, say) cuts the wait short.
func (s *Source) Run(ctx context.Context, sink cluster.Sink) {
	sn := streamNodes{s: s, onItsWay: sink.OnItsWay, lookedUp: sink.SeedsLookedUp}
	installed := func() *vbmap.Config {
		if t := sink.Topology(); t != nil {
			return t.Config()
		}
		return nil
	}
	nodes := func() []string { return sn.addrs(installed, sink.Network()) }
	unreachable := func() {
		sn.stranded = true
		sink.SourceUnreachable()
	}
	s.c.Stream(ctx, nodes, sink.ConfigWanted(), unreachable, func(raw []byte, host, addr string) error {
		if err := sink.OtherCluster(raw, host); err != nil {
			return err // not offered: the stream moves to another node
		}
		if sn.lookedUpOnly[addr] {
			if err := sink.LookedUpForeign(raw, addr); err != nil {
				return err // another bucket of the same name: as above
			}
		} else {
			sn.stranded = false // a node the config names serves again
		}
		sn.delivered(raw, host, sink.Offer(raw, host, "http stream "+addr))
		return nil
	})
}

// streamNodes tells Stream the REST addresses to stream from. Used on
// Stream's goroutine only.
type streamNodes struct {
	s *Source
	// onItsWay is the sink's OnItsWay; lookedUp its SeedsLookedUp (nil:
	// none).
	onItsWay func(vbmap.Version) bool
	lookedUp func() []string
	// lookedUpOnly are the addresses the last addrs gave for the seeds
	// looked up again alone (no config names them): what they stream
	// is judged as the lookup's own dials judge it on the KV path
	// (Sink.LookedUpForeign).
	lookedUpOnly map[string]bool
	// stranded: a round of the stream found no node to serve it
	// (Stream's unreachable), and no node but a looked-up seed alone
	// has served one since. The seeds looked up again are streamed
	// from only meanwhile: once a node the config names serves again,
	// the stream's rotation over its nodes (a reopen each redial
	// period) would otherwise pass through them for as long as the
	// cluster keeps them (until a newer config is installed: on a
	// quiet cluster, days), a dead one holding the stream closed for
	// its connect timeout, another cluster's refused with warnings.
	stranded bool
	// pending is (a copy of) the newest config the stream delivered
	// that was newer than the held one when offered (cluster.OfferNewer),
	// kept until the cluster installs that version or a newer one, or
	// refuses it: the addresses are read from it meanwhile. A node removed from the
	// cluster closes its streams right after sending the config without
	// it, and the stream's end is asked about (is its node still listed?)
	// before the cluster's config loop has installed that config: read
	// from the installed one, the node would look still listed, and the
	// stream would be reopened after the back-off meant for streams that
	// end at once rather than at once.
	pending     []byte
	pendingHost string
	pendingVer  vbmap.Version
}

// delivered notes a config the stream delivered and what became of its
// offer.
func (sn *streamNodes) delivered(raw []byte, host string, o cluster.Offer) {
	if o != cluster.OfferNewer {
		return
	}
	v, ok := vbmap.PeekVersion(raw)
	if !ok {
		return
	}
	if sn.pending != nil && !v.Newer(sn.pendingVer) {
		return
	}
	sn.pending = append(sn.pending[:0], raw...)
	sn.pendingHost, sn.pendingVer = host, v
}

// addrs are the REST addresses of the nodes of the newer of the installed
// config (installedCfg's) and the pending one, on network (the REST seeds
// when that names none), then, while stranded, those of the seeds looked
// up again (lookedUp) that are not among them. The pending config is read only while the
// cluster may still install it (onItsWay, asked before installedCfg: a
// config installed is held before it is no longer on its way): one it
// refused (another cluster's, one without a vbucket map, ...) never
// says where to stream from.
func (sn *streamNodes) addrs(installedCfg func() *vbmap.Config, network string) []string {
	onItsWay := sn.pending != nil && sn.onItsWay(sn.pendingVer)
	installed := installedCfg()
	cfg := installed
	if sn.pending != nil {
		if installed != nil && !sn.pendingVer.Newer(installed.Version()) {
			sn.pending = nil // installed, or overtaken
		} else if !onItsWay {
			sn.pending = nil // refused, or dropped for a newer config refused
		} else if pc, err := vbmap.Parse(sn.pending, sn.pendingHost); err == nil {
			cfg = pc
		} else {
			sn.pending = nil // the cluster refuses it too
		}
	}
	var out []string
	if cfg != nil {
		for _, n := range cfg.Nodes() {
			if a, ok := n.MgmtAddr(network, sn.s.tls); ok {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		out = sn.s.addrs(nil)
	}
	clear(sn.lookedUpOnly)
	if sn.lookedUp == nil || !sn.stranded {
		return out
	}
	for _, kv := range sn.lookedUp() {
		if a, ok := sn.s.restAddr(kv); ok && !slices.Contains(out, a) {
			out = append(out, a)
			if sn.lookedUpOnly == nil {
				sn.lookedUpOnly = map[string]bool{}
			}
			sn.lookedUpOnly[a] = true
		}
	}
	return out
}
