package cluster

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// intakeSeeds is how many random sequences TestIntakeProperties drives:
// a modest number in the default run, more on demand
// (go test -run TestIntakeProperties -intake.seeds=2000).
var intakeSeeds = flag.Int("intake.seeds", 500, "random sequences TestIntakeProperties drives")

// propKind is what a config of the property test is.
type propKind uint8

const (
	propOwn     propKind = iota // the cluster's own, valid
	propForeign                 // another cluster's bucket of the same name, valid
	propBroken                  // its version peeked, refused once parsed (rejected)
)

// propConfig describes one config the property test offers.
type propConfig struct {
	kind    propKind
	epoch   int64
	rev     uint64
	variant int  // bytes that differ for one version (another node's copy)
	odd     bool // its revision spelled so that PeekVersion cannot read it
	broken  int  // propBroken: how (0 another bucket, 1 no vbucket map, 2 malformed JSON)
}

func (p propConfig) version() vbmap.Version { return vbmap.Version{Epoch: p.epoch, Rev: p.rev} }

func (p propConfig) String() string {
	s := [...]string{"own", "foreign", "broken"}[p.kind]
	if p.kind == propBroken {
		s += fmt.Sprint(p.broken)
	}
	if p.odd {
		s = "odd " + s
	}
	return fmt.Sprintf("%s %d/%d.%d", s, p.epoch, p.rev, p.variant)
}

const (
	propOwnUUID     = "c0ffee"
	propForeignUUID = "f0e1gn"
)

// bytes is the config's JSON. Its node's address is on no network the
// test cluster uses (propCluster): an install dials nothing.
func (p propConfig) bytes() []byte {
	uuid, name, vbmapJSON := propOwnUUID, "default", `,"vBucketMap":[[0]]`
	if p.kind == propForeign {
		uuid = propForeignUUID
	}
	tail := "}"
	if p.kind == propBroken {
		switch p.broken {
		case 0:
			name = "other"
		case 1:
			vbmapJSON = ""
		default:
			tail = ",}" // inside a nested value: PeekVersion skips it, Parse refuses it
		}
	}
	rev := `"rev"`
	if p.odd {
		rev = `"\u0072ev"`
	}
	return fmt.Appendf(nil, `{%s:%d,"revEpoch":%d,"name":%q,"nodeLocator":"vbucket","uuid":"b1","clusterUUID":%q,"x":%d,`+
		`"nodesExt":[{"hostname":"127.0.0.1","services":{"kv":11210}}],`+
		`"vBucketServerMap":{"serverList":["127.0.0.1:11210"]%s%s}`,
		rev, p.rev, p.epoch, name, uuid, p.variant, vbmapJSON, tail)
}

// propOp is one step of a sequence: a config offered (where: 0 at once,
// 1 by the config loop's next parse, as it starts, 2 by its next round,
// once a config is installed or refused: before the parse is marked
// done), or, for a nil cfg, a round of the config loop if it is signalled.
type propOp struct {
	cfg   *propConfig
	where int
}

func (o propOp) String() string {
	if o.cfg == nil {
		return "loop"
	}
	return fmt.Sprintf("offer(%v)@%d", *o.cfg, o.where)
}

// propCluster is a Cluster, not connected and without a config loop (the
// test runs its rounds: installOffered, when the mailbox signals one),
// holding the cluster's own config of version 1/5. hook is called before
// each parse (BeforeParse: parsing true) and when a config was installed
// or refused (parsing false).
func propCluster(hook func(parsing bool)) *Cluster {
	c := &Cluster{
		cfg: Config{Bucket: "default", Clock: retry.RealClock(),
			NodeError: func(addr string, err error) error { return &nodeError{addr, err} },
			Logger: slog.New(logHook(func(line string) {
				if strings.HasPrefix(line, "kvwire: config updated") || strings.HasPrefix(line, "kvwire: ignoring a cluster config") {
					hook(false)
				}
			})),
			BeforeParse: func() { hook(true) },
		},
		nodes:       map[string]*Node{},
		fetches:     map[*Node]*fetchState{},
		unreachable: make(chan struct{}, 1),
		wanted:      make(chan struct{}, 1),
		network:     "no-such-network", // no node is dialed
	}
	c.intake.ready = make(chan struct{}, 1)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	first, err := vbmap.Parse(propConfig{kind: propOwn, epoch: 1, rev: 5}.bytes(), "127.0.0.1")
	if err != nil {
		panic(err)
	}
	var logs deferredLogs
	c.mu.Lock()
	c.installLocked(first, &logs)
	c.mu.Unlock()
	return c
}

// runIntakeSequence drives ops through a propCluster and returns the first
// property that failed ("" for none).
func runIntakeSequence(ops []propOp) (failure string) {
	var (
		queued [3][]propConfig // offers waiting for where 1 and 2
		parses []string        // the bytes of each parse, in order
		round  []string        // what this round parses, in order (odd first)
		ownOK  = map[vbmap.Version]bool{{Epoch: 1, Rev: 5}: true}
		// own: each own config offered, with its version, unless it
		// was one whose version cannot be peeked that another such
		// config took the place of before the loop took it (the intake
		// keeps the last such one: which is newer it cannot tell).
		own     = map[string]vbmap.Version{}
		brokenV = map[vbmap.Version]bool{} // versions of peekable configs refused once parsed
		bad     []string
		c       *Cluster
		last    vbmap.Version
	)
	fail := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	held := func() *vbmap.Config { return c.Topology().Config() }
	check := func() {
		h := held()
		if h.ClusterUUID() != propOwnUUID {
			fail("another cluster's config (uuid %s, %v) installed", h.ClusterUUID(), h.Version())
		}
		if last.Newer(h.Version()) {
			fail("the held config went back from %v to %v", last, h.Version())
		}
		last = h.Version()
	}
	offer := func(p propConfig) {
		raw := p.bytes()
		v := p.version()
		if p.kind == propOwn {
			ownOK[v] = true
		}
		if p.kind == propBroken && !p.odd {
			brokenV[v] = true
		}
		c.intake.mu.Lock()
		oddBefore := string(c.intake.odd)
		c.intake.mu.Unlock()
		res := c.Offer(raw, "127.0.0.1", "prop")
		c.intake.mu.Lock()
		if oddBefore != "" && string(c.intake.odd) != oddBefore {
			delete(own, oddBefore)
		}
		c.intake.mu.Unlock()
		if p.kind == propOwn {
			own[string(raw)] = v
		}
		check()
		switch {
		case p.kind != propOwn || p.odd:
		case res == OfferStale && v.Newer(held().Version()):
			fail("%v offered: stale, holding %v", p, held().Version())
		case res == OfferRejected && !brokenV[v]:
			fail("%v offered: rejected, no config of its version refused", p)
		}
	}
	c = propCluster(func(parsing bool) {
		where := 2
		if parsing {
			where = 1
			if len(round) == 0 {
				fail("a parse the round did not take")
			} else {
				parses, round = append(parses, round[0]), round[1:]
			}
		}
		q := queued[where]
		queued[where] = nil
		for _, p := range q {
			offer(p)
		}
	})
	defer c.Close()
	last = held().Version()
	loopRound := func() bool {
		select {
		case <-c.intake.ready:
		default:
			return false
		}
		c.intake.mu.Lock()
		round = round[:0]
		if c.intake.odd != nil {
			round = append(round, string(c.intake.odd))
		}
		if c.intake.raw != nil {
			round = append(round, string(c.intake.raw))
		}
		c.intake.mu.Unlock()
		c.installOffered()
		check()
		return true
	}
	for _, o := range ops {
		switch {
		case o.cfg == nil:
			loopRound()
		case o.where == 0:
			offer(*o.cfg)
		default:
			queued[o.where] = append(queued[o.where], *o.cfg)
		}
	}
	for _, q := range queued { // the loop never came to them
		for _, p := range q {
			offer(p)
		}
	}
	queued = [3][]propConfig{}
	for i := 0; loopRound(); i++ {
		if i > 100 {
			return "the loop never went idle"
		}
	}

	// Idle.
	h := held().Version()
	// The newest own config offered is held, unless a broken config of
	// its version was refused (its version rejected) or of a newer one was
	// offered: the intake keeps two configs waiting, one behind the other
	// in case that one is refused; a broken one and another cluster's,
	// both newer, both refused, leave nothing of an older own config.
	var newestOK vbmap.Version
	for _, v := range own {
		shadowed := false
		for b := range brokenV {
			shadowed = shadowed || !v.Newer(b)
		}
		if !shadowed && v.Newer(newestOK) {
			newestOK = v
		}
	}
	if !ownOK[h] {
		fail("holding %v, no config of the cluster's own of that version offered", h)
	}
	if newestOK.Newer(h) {
		fail("idle holding %v; the newest own config offered is %v", h, newestOK)
	}
	c.intake.mu.Lock()
	if c.intake.raw != nil || c.intake.behind != nil || c.intake.odd != nil || c.intake.parsingSet {
		fail("idle with bytes kept: raw %d, behind %d, odd %d, parsing %v",
			len(c.intake.raw), len(c.intake.behind), len(c.intake.odd), c.intake.parsingSet)
	}
	c.intake.mu.Unlock()
	for _, v := range []vbmap.Version{{Epoch: h.Epoch, Rev: h.Rev + 1}, {Epoch: h.Epoch + 1, Rev: 0}} {
		if c.OnItsWay(v) {
			fail("idle, OnItsWay(%v) holding %v", v, h)
		}
	}
	for i := 1; i < len(parses); i++ {
		if parses[i] == parses[i-1] {
			fail("parse %d parsed the bytes parse %d did: %.60s", i, i-1, parses[i])
		}
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; ")
	}
	return ""
}

// randomIntakeOps is a random sequence: offers of the cluster's own
// configs, another cluster's, configs whose revision cannot be peeked and
// broken ones, of versions near the held one (repeats, older ones, the
// same bytes twice), and rounds of the config loop.
func randomIntakeOps(r *rand.Rand) []propOp {
	n := 1 + r.Intn(14)
	ops := make([]propOp, 0, n)
	var made []propConfig
	for range n {
		if r.Intn(4) == 0 {
			ops = append(ops, propOp{})
			continue
		}
		var p propConfig
		if len(made) > 0 && r.Intn(4) == 0 {
			p = made[r.Intn(len(made))] // the same bytes again
		} else {
			p = propConfig{kind: propOwn, epoch: 1, rev: uint64(3 + r.Intn(8)), variant: r.Intn(2)}
			switch k := r.Intn(10); {
			case k < 3:
				p.kind = propForeign
				p.rev += uint64(r.Intn(3))
			case k < 4:
				p.kind, p.broken = propBroken, r.Intn(3)
			}
			if r.Intn(6) == 0 {
				p.odd = true
			}
			if r.Intn(15) == 0 {
				p.epoch = 2
			}
			made = append(made, p)
		}
		ops = append(ops, propOp{cfg: &p, where: r.Intn(3)})
	}
	return ops
}

// shrinkIntakeOps removes ops one at a time while the sequence still fails.
func shrinkIntakeOps(ops []propOp) []propOp {
	for again := true; again; {
		again = false
		for i := range ops {
			try := append(append([]propOp{}, ops[:i]...), ops[i+1:]...)
			if runIntakeSequence(try) != "" {
				ops, again = try, true
				break
			}
		}
	}
	return ops
}

// Random sequences of offers (the cluster's own configs, another
// cluster's of the same bucket name, configs whose revision cannot be
// peeked, broken ones) and config-loop rounds, offers also made while the
// loop parses and once it has installed or refused a config. Once the
// loop is idle: the held config never went back and is never another
// cluster's; the newest own config offered is held (unless a broken
// config of its version was refused: rejected unread); no bytes are kept
// in the intake's slots; nothing newer is on its way; no bytes were
// parsed twice in a row. A failure is shrunk and printed as ops.
func TestIntakeProperties(t *testing.T) {
	for seed := range int64(*intakeSeeds) {
		ops := randomIntakeOps(rand.New(rand.NewSource(seed)))
		if got := runIntakeSequence(ops); got != "" {
			small := shrinkIntakeOps(ops)
			var b bytes.Buffer
			for _, o := range small {
				fmt.Fprintf(&b, "\n\t%v", o)
			}
			t.Fatalf("seed %d: %s\nshrunk to:%s\nwhich fails: %s", seed, got, b.String(), runIntakeSequence(small))
		}
	}
}

// The property test's configs are what they say: the valid ones parse,
// of their version and cluster; an odd one's version cannot be peeked; a
// broken one's can, and it is refused where it would be installed.
func TestIntakePropertyConfigs(t *testing.T) {
	for _, p := range []propConfig{
		{kind: propOwn, epoch: 1, rev: 7}, {kind: propForeign, epoch: 2, rev: 9, variant: 1},
		{kind: propBroken, epoch: 1, rev: 8}, {kind: propBroken, epoch: 1, rev: 8, broken: 1},
		{kind: propBroken, epoch: 1, rev: 8, broken: 2}, {kind: propOwn, epoch: 1, rev: 7, odd: true},
	} {
		raw := p.bytes()
		v, peeked := vbmap.PeekVersion(raw)
		if peeked == p.odd || peeked && v != p.version() {
			t.Errorf("%v: peeked %v %v", p, v, peeked)
		}
		cfg, err := vbmap.Parse(raw, "127.0.0.1")
		switch {
		case p.kind == propBroken:
			if err == nil && cfg.BucketName() == "default" && cfg.HasVbucketMap() {
				t.Errorf("%v: parsed as a config that would be installed", p)
			}
		case err != nil:
			t.Errorf("%v: %v", p, err)
		case cfg.Version() != p.version() || !cfg.HasVbucketMap():
			t.Errorf("%v: parsed as %v", p, cfg.Version())
		case (cfg.ClusterUUID() == propOwnUUID) != (p.kind == propOwn):
			t.Errorf("%v: cluster %s", p, cfg.ClusterUUID())
		}
	}
}

// intakeRegression runs a sequence TestIntakeProperties found failing,
// shrunk; it must now hold every property.
func intakeRegression(t *testing.T, ops ...propOp) {
	t.Helper()
	if got := runIntakeSequence(ops); got != "" {
		t.Error(got)
	}
}

func offerAt(where int, p propConfig) propOp { return propOp{cfg: &p, where: where} }

// The cluster's own config waits behind another cluster's newer one (in
// case that one is refused), and another cluster's config, newer than the
// own one and older than the one waiting, is offered: it took the slot
// behind, both of the other cluster's were refused, and the own config was
// gone (the client routed by the older map until a poll or push offered it
// again). A config of another cluster never waits behind: it would only
// be refused.
func TestIntakeOwnConfigBehindNotDisplacedByAnotherClusters(t *testing.T) {
	intakeRegression(t,
		offerAt(0, propConfig{kind: propForeign, epoch: 1, rev: 11, variant: 1}),
		offerAt(0, propConfig{kind: propOwn, epoch: 1, rev: 9, variant: 1}),
		offerAt(0, propConfig{kind: propForeign, epoch: 1, rev: 10, variant: 1}))
	// The same, the other cluster's config waiting when a newer one of
	// it comes: it went behind, in the own config's place.
	intakeRegression(t,
		offerAt(0, propConfig{kind: propForeign, epoch: 1, rev: 10}),
		offerAt(0, propConfig{kind: propOwn, epoch: 1, rev: 9}),
		offerAt(0, propConfig{kind: propForeign, epoch: 1, rev: 11}))
}

// A config whose revision PeekVersion cannot read, offered again (the same
// bytes, another operation's NOT_MY_VBUCKET body) while the loop parses
// it, was kept again and parsed a second time in the next round: it is
// the config being parsed, on its way.
func TestIntakeOddConfigOfferedWhileParsedIsNotParsedAgain(t *testing.T) {
	for _, p := range []propConfig{
		{kind: propOwn, epoch: 1, rev: 9, odd: true},
		{kind: propForeign, epoch: 1, rev: 9, odd: true},
	} {
		intakeRegression(t, offerAt(0, p), offerAt(1, p), propOp{})
	}
}

// Another cluster's config, refused once parsed, offered again (the same
// bytes) was parsed again: its version is not remembered as rejected (the
// cluster's own config may come to it), but those bytes are refused again
// whenever parsed, the cluster's uuid held never changing.
func TestIntakeOtherClustersConfigRefusedIsNotParsedAgain(t *testing.T) {
	p := propConfig{kind: propForeign, epoch: 1, rev: 9}
	intakeRegression(t, offerAt(0, p), propOp{}, offerAt(0, p))
	intakeRegression(t, offerAt(0, p), offerAt(2, p), propOp{}) // refused, its parse not yet marked done
}
