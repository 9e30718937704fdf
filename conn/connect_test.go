package conn

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lossyDialer stands for a network whose SYNs are lost until heal: an
// attempt begun before it waits until given up (its SYN is gone; the
// kernel would send it again only seconds later), one begun after it
// connects at once (a net.Pipe whose server end goes to servers).
type lossyDialer struct {
	mu       sync.Mutex
	healed   bool
	refuse   bool
	started  int
	inFlight int
	maxIn    int               // attempts in flight and not given up, at most, when one begins
	live     []context.Context // of the attempts in flight
	begun    chan struct{}     // one value per attempt begun
	servers  chan net.Conn
}

func newLossyDialer() *lossyDialer {
	return &lossyDialer{begun: make(chan struct{}, 64), servers: make(chan net.Conn, 4)}
}

func (d *lossyDialer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d.mu.Lock()
	d.started++
	healed, refuse := d.healed, d.refuse
	d.inFlight++
	d.live = append(d.live, ctx)
	n := 0
	for _, c := range d.live {
		if c.Err() == nil {
			n++
		}
	}
	d.maxIn = max(d.maxIn, n)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inFlight--
		for i, c := range d.live {
			if c == ctx {
				d.live = append(d.live[:i], d.live[i+1:]...)
				break
			}
		}
		d.mu.Unlock()
	}()
	d.begun <- struct{}{}
	switch {
	case refuse:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case healed:
		c, s := net.Pipe()
		d.servers <- s
		return c, nil
	}
	<-ctx.Done()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
}

func (d *lossyDialer) set(f func(*lossyDialer)) {
	d.mu.Lock()
	f(d)
	d.mu.Unlock()
}

func (d *lossyDialer) counts() (started, inFlight, maxIn int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started, d.inFlight, d.maxIn
}

// A dial through a network that lost its SYNs does not wait for the
// kernel to send them again: each ConnectAttempt (on the connection's
// clock, a fake one here) without an answer begins another attempt beside
// those in flight, at most four at once (the oldest given up), so the
// first attempt after the network heals connects, and the dial returns
// with every other attempt ended.
func TestDialBeginsAFreshAttemptEachConnectAttempt(t *testing.T) {
	fc := newFakeClock()
	d := newLossyDialer()
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(testCtx(t), "lossy:11210", Options{DialContext: d.dial, Memcached: true, clock: fc})
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	recv(t, d.begun)
	for i := 2; i <= 7; i++ { // the network stays down for six attempts
		waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
		fc.Advance(DefaultConnectAttempt)
		recv(t, d.begun)
	}
	d.set(func(d *lossyDialer) { d.healed = true })
	waitFor(t, "the attempt's timer", func() bool { return fc.armedWithin(DefaultConnectAttempt) })
	fc.Advance(DefaultConnectAttempt)
	recv(t, d.begun)
	p := newPeer(t, recv(t, d.servers))
	serveMemcachedBoot(p)
	if err := recv(t, dialed); err != nil {
		t.Fatalf("Dial after the network healed: %v", err)
	}
	p.nc.Close()
	started, inFlight, maxIn := d.counts()
	if started != 8 || inFlight != 0 || maxIn > maxConnectAttempts {
		t.Fatalf("%d attempts, %d still in flight, at most %d at once; want 8, 0, at most %d", started, inFlight, maxIn, maxConnectAttempts)
	}
}

// A refused attempt ends the dial at once with its error; the context's
// end ends it with the attempt's error it cut short. Either way no
// attempt is left in flight.
func TestDialAttemptsEndWithARefusalOrTheContext(t *testing.T) {
	fc := newFakeClock()
	d := newLossyDialer()
	d.set(func(d *lossyDialer) { d.refuse = true })
	_, err := Dial(testCtx(t), "refused:11210", Options{DialContext: d.dial, Memcached: true, clock: fc})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial to a refusing server: %v", err)
	}
	if started, inFlight, _ := d.counts(); started != 1 || inFlight != 0 {
		t.Fatalf("%d attempts, %d in flight; want 1, 0", started, inFlight)
	}

	d = newLossyDialer()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = Dial(ctx, "lost:11210", Options{DialContext: d.dial, Memcached: true, clock: fc})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial as the context ends: %v", err)
	}
	if _, inFlight, _ := d.counts(); inFlight != 0 {
		t.Fatalf("%d attempts in flight after Dial returned", inFlight)
	}
}

// A DialContext that returns neither a connection nor an error is a bug of
// the caller's: Dial says so, with one attempt or several, rather than
// waiting for a connection that will never come or using a nil one.
func TestDialContextReturningNothing(t *testing.T) {
	nothing := func(context.Context, string, string) (net.Conn, error) { return nil, nil }
	for _, attempt := range []time.Duration{-1, 0} {
		got := make(chan error, 1)
		go func() {
			_, err := Dial(testCtx(t), "nothing:11210", Options{DialContext: nothing, ConnectAttempt: attempt})
			got <- err
		}()
		if err := recv(t, got); err == nil || !strings.Contains(err.Error(), "DialContext returned no connection") {
			t.Fatalf("ConnectAttempt %v: Dial: %v; want an error naming DialContext", attempt, err)
		}
	}
}
