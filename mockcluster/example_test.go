package mockcluster_test

import (
	"fmt"
	"net"
	"strings"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A user's test starts a cluster, points its client at ConnString (or
// Addrs) and closes the cluster at the end (t.Cleanup(c.Close) in a real
// test). This example talks to a node with raw memdx requests.
func Example() {
	c, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// Seed a document, then read it back over the wire from the node that
	// owns its vbucket.
	b := c.Bucket("default")
	if _, err := b.Set("_default", "_default", "greeting", []byte(`"hello"`), 0, 0); err != nil {
		panic(err)
	}
	vb := b.VbucketForKey([]byte("greeting"))
	owner := c.Node(b.VbucketMap()[vb][0])

	nc, err := net.Dial("tcp", owner.Addr())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	get := memdx.NewGet([]byte("greeting"))
	get.Vbucket = vb
	var out []byte
	for i, r := range []memdx.Request{
		memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload("Administrator", "password")),
		memdx.NewSelectBucket("default"),
		get,
	} {
		if out, err = r.AppendTo(out, uint32(i)); err != nil {
			panic(err)
		}
	}
	if _, err := nc.Write(out); err != nil {
		panic(err)
	}
	var buf []byte
	tmp := make([]byte, 4096)
	for got := 0; got < 3; {
		n, err := nc.Read(tmp)
		if err != nil {
			panic(err)
		}
		buf = append(buf, tmp[:n]...)
		for {
			p, size, err := memdx.DecodePacket(buf, 0)
			if err != nil {
				break
			}
			fmt.Println(strings.TrimSpace(fmt.Sprintf("%s %s %s", p.OpCode, p.Status, p.Value)))
			buf = buf[size:]
			got++
		}
	}
	fmt.Println(c.ConnString() != "")
	// Output:
	// SASL_AUTH SUCCESS
	// SELECT_BUCKET SUCCESS
	// GET SUCCESS "hello"
	// true
}
