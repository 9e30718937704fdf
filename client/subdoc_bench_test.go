package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// cannedNode is a faultnode server that answers GET and
// SUBDOC_MULTI_LOOKUP with fixed responses, written from one buffer with
// the request's opaque patched in: the server side allocates the same for
// both (one buffer per request read), so a difference in allocations
// between them is the client's.
func cannedNode(b *testing.B, responses map[memdx.OpCode][]byte) *Collection {
	b.Helper()
	// One node: every key is the canned node's.
	mc, err := mockcluster.New(mockcluster.Options{Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	cfg := mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(0)
	addr := mc.Node(0).Addr()
	mc.Close()
	var mu sync.Mutex
	srv, err := faultnode.NewServer(func(c *faultnode.ServerConn, req *memdx.Packet) bool {
		resp, ok := responses[req.OpCode]
		if !ok {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		binary.BigEndian.PutUint32(resp[12:16], req.Opaque)
		_ = c.Write(resp)
		return true
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	srv.SetConfig(faultnode.RewriteConfigPorts(cfg, map[string]string{faultnode.Port(addr): faultnode.Port(srv.Addr())}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+srv.Addr()+"/"+mockcluster.DefaultBucket,
		testOptions(&Options{Username: faultnode.DefaultUser, Password: faultnode.DefaultPassword, ConfigPollInterval: time.Hour}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c.DefaultCollection()
}

func cannedResponse(b *testing.B, op memdx.OpCode, extras, value []byte) []byte {
	p := memdx.Packet{Magic: memdx.MagicRes, OpCode: op, Cas: 0x1234, Extras: extras, Value: value}
	if op == memdx.OpGet {
		p.Datatype = memdx.DatatypeJSON
	}
	out, err := memdx.AppendPacket(nil, &p)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkLookupInVsGet: a LookupIn of three 100-byte paths against a Get
// of a 300-byte document. The target: LookupIn allocates no more
// than Get plus one per returned path.
func BenchmarkLookupInVsGet(b *testing.B) {
	part := []byte(`"` + string(bytes.Repeat([]byte("x"), 98)) + `"`)
	doc := bytes.Repeat([]byte("y"), 3*len(part))
	var lookup []byte
	for range 3 {
		lookup = memdx.AppendSubdocLookupResult(lookup, memdx.StatusSuccess, part)
	}
	col := cannedNode(b, map[memdx.OpCode][]byte{
		memdx.OpGet:               cannedResponse(b, memdx.OpGet, []byte{0, 0, 0, 0}, doc),
		memdx.OpSubdocMultiLookup: cannedResponse(b, memdx.OpSubdocMultiLookup, nil, lookup),
	})
	ctx := context.Background()
	specs := []LookupInSpec{GetSpec("a", nil), GetSpec("b.c", nil), GetSpec("d[0]", nil)}
	b.Run("Get-300B", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := col.Get(ctx, "doc", nil)
			if err != nil || len(r.Value) != len(doc) {
				b.Fatalf("%d bytes, %v", len(r.Value), err)
			}
		}
	})
	b.Run("LookupIn-3x100B", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := col.LookupIn(ctx, "doc", specs, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := range specs {
				if v, err := r.ValueAt(i); err != nil || len(v) != len(part) {
					b.Fatalf("spec %d: %d bytes, %v", i, len(v), err)
				}
			}
		}
	})
}
