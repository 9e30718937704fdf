package mockcluster

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// FuzzServe writes arbitrary bytes into one connection (after a valid
// bootstrap when the input starts with one, as the seeds do) and checks that
// the node answers or closes, and still serves a new connection: a
// malformed request must never crash the mock or wedge it.
func FuzzServe(f *testing.F) {
	enc := func(rs ...memdx.Request) []byte {
		var b []byte
		for i, r := range rs {
			var err error
			if b, err = r.AppendTo(b, uint32(i+1)); err != nil {
				f.Fatal(err)
			}
		}
		return b
	}
	boot := []memdx.Request{
		memdx.NewHello(nil, stdFeatures),
		memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload(DefaultUser, DefaultPassword)),
		memdx.NewSelectBucket(DefaultBucket),
	}
	withColl := func(r memdx.Request) memdx.Request { r.Collections = true; return r }
	dur := withColl(memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0))
	dur.Durability = memdx.DurabilityMajority
	f.Add(enc(boot...))
	f.Add(enc(append(boot, withColl(memdx.NewGet([]byte("k"))), withColl(memdx.NewStore(memdx.OpSet, []byte("k"), []byte(`{"a":1}`), 1, 10)),
		withColl(memdx.NewCounter(memdx.OpIncrement, []byte("c"), 1, 1, 0)), withColl(memdx.NewGetLocked([]byte("k"), 3)),
		withColl(memdx.NewUnlock([]byte("k"), 5)), withColl(memdx.NewTouch([]byte("k"), 4)), dur,
		memdx.NewGetClusterConfigKnown(1, 2), memdx.NewCollectionsGetID("a", "b"), memdx.NewStat(nil),
		memdx.NewGetErrorMap(2))...))
	scanCreate, _ := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{KeyOnly: true,
		Range: &memdx.RangeScanRange{Start: []byte("a"), End: []byte("z"), ExclusiveEnd: true}})
	sampleCreate, _ := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{Sampling: &memdx.RangeScanSampling{Samples: 2, Seed: 7}})
	f.Add(enc(append(boot, withColl(memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0)), scanCreate, sampleCreate,
		memdx.NewRangeScanContinue(memdx.RangeScanContinue{ItemLimit: 1, TimeLimitMs: 5, ByteLimit: 10}),
		memdx.NewRangeScanCancel(memdx.RangeScanID{1}))...))
	f.Add(enc(memdx.NewSASLAuth(memdx.MechScramSHA512, []byte("n,,n=Administrator,r=abc")),
		memdx.NewSASLStep(memdx.MechScramSHA512, []byte("c=biws,r=abc,p=AAAA"))))
	xboot := append([]memdx.Request{memdx.NewHello(nil, append([]memdx.HelloFeature{memdx.FeatureXattr}, stdFeatures...))}, boot[1:]...)
	f.Add(enc(append(xboot, withColl(memdx.NewSubdocMultiMutation([]byte("k"), memdx.SubdocDocMkdoc, 0, []memdx.SubdocMutateOp{
		{Op: memdx.OpSubdocDictUpsert, Flags: memdx.SubdocPathXattr | memdx.SubdocPathExpandMacros, Path: []byte("m.cas"), Value: []byte(`"${Mutation.CAS}"`)},
		{Op: memdx.OpSubdocArrayPushLast, Flags: memdx.SubdocPathMkdirP, Path: []byte("a.b"), Value: []byte(`1,2`)},
		{Op: memdx.OpSubdocCounter, Path: []byte("n"), Value: []byte(`5`)}})),
		withColl(memdx.NewSubdocMultiLookup([]byte("k"), 0, []memdx.SubdocLookupOp{
			{Op: memdx.OpSubdocGet, Flags: memdx.SubdocPathXattr, Path: []byte("$document.CAS")},
			{Op: memdx.OpSubdocGetCount, Path: []byte("a.b")}, {Op: memdx.OpGet}})),
		withColl(memdx.NewSubdocMutation(memdx.OpSubdocArrayInsert, []byte("k"), []byte("a.b[0]"), []byte(`0`), 0, 0, 0)),
		withColl(memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("k"), []byte("a.b[-1]"), 0, 0)),
		withColl(memdx.NewDelete([]byte("k"))))...))
	f.Add([]byte{0x80, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'k'})
	f.Add([]byte{0x08, 0x01, 0x02, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x09})

	c, err := New(Options{Nodes: 1, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 16}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(c.Close)
	node := c.Node(0)
	f.Fuzz(func(t *testing.T, data []byte) {
		// An in-memory connection: TCP would leave a TIME_WAIT socket per
		// input and exhaust the machine's ports.
		client := pipeConn(node)
		go func() {
			_, _ = client.Write(data)
			client.CloseWrite()
		}()
		// The node answers what it can and closes once it read EOF.
		done := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, client)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("reading the answers: %v", err)
			}
		case <-time.After(10 * time.Second):
			client.Close()
			t.Fatal("node neither answered nor closed within 10s")
		}
		client.Close()
		check := pipeConn(node)
		defer check.Close()
		// SASL_LIST_MECHS: kv_engine refuses NOOP before authentication.
		nr := memdx.NewSASLListMechs()
		b, _ := nr.AppendTo(nil, 1)
		go func() { _, _ = check.Write(b) }()
		hdr := make([]byte, memdx.HeaderSize)
		if _, err := io.ReadFull(check, hdr); err != nil {
			t.Fatalf("node stopped serving: %v", err)
		}
		if h, err := memdx.DecodeHeader(hdr, 0); err != nil || h.VbucketOrStatus != 0 {
			t.Fatalf("SASL_LIST_MECHS answer %x: %v", hdr, err)
		}
	})
}

// memConn is one end of an in-memory, half-closable connection.
type memConn struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (m *memConn) Read(b []byte) (int, error)       { return m.r.Read(b) }
func (m *memConn) Write(b []byte) (int, error)      { return m.w.Write(b) }
func (m *memConn) CloseWrite()                      { m.w.Close() }
func (m *memConn) Close() error                     { m.w.Close(); return m.r.Close() }
func (m *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (m *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// pipeConn connects an in-memory client to node and returns the client end.
func pipeConn(node *Node) *memConn {
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	node.adopt(&memConn{r: c2sR, w: s2cW})
	return &memConn{r: s2cR, w: c2sW}
}
