package mockcluster_test

import (
	"fmt"
	"net"
	"strings"
	"time"

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
	fmt.Println(len(c.Addrs()), "nodes")

	// Seed a document, then read it back over the wire from the node that
	// owns its vbucket.
	b := c.Bucket("default")
	if _, err := b.Set("_default", "_default", "greeting", []byte(`"hello"`), 0, 0); err != nil {
		panic(err)
	}
	vb := b.VbucketForKey([]byte("greeting"))
	owner := c.Node(b.VbucketMap()[vb][0])

	get := memdx.NewGet([]byte("greeting"))
	get.Vbucket = vb
	for _, p := range roundTrip(owner.Addr(), login(), memdx.NewSelectBucket("default"), get) {
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%s %s %s", p.OpCode, p.Status, p.Value)))
	}
	// Output:
	// 3 nodes
	// SASL_AUTH SUCCESS
	// SELECT_BUCKET SUCCESS
	// GET SUCCESS "hello"
}

// Faults answer a status instead of running the request, delay answers or
// close connections. This one makes the next SET of "k" fail with TMPFAIL;
// the write is not applied, the retry is.
func ExampleCluster_AddFault() {
	c, err := mockcluster.New(mockcluster.Options{Nodes: 1})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	h := c.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail},
		Times:  1,
	})
	defer h.Remove()

	b := c.Bucket("default")
	set := memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0)
	set.Vbucket = b.VbucketForKey([]byte("k"))
	for _, p := range roundTrip(c.Node(0).Addr(), login(), memdx.NewSelectBucket("default"), set, set)[2:] {
		fmt.Println(p.OpCode, p.Status)
	}
	fmt.Println("hits:", h.Hits(), "mutations:", b.MutationCount("_default", "_default", "k"))
	// Output:
	// SET ETMPFAIL
	// SET SUCCESS
	// hits: 1 mutations: 1
}

func login() memdx.Request {
	return memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload(mockcluster.DefaultUser, mockcluster.DefaultPassword))
}

// roundTrip sends the requests pipelined on a new connection and returns
// their responses.
func roundTrip(addr string, reqs ...memdx.Request) []memdx.Packet {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	for i := range reqs {
		if out, err = reqs[i].AppendTo(out, uint32(i)); err != nil {
			panic(err)
		}
	}
	if _, err := nc.Write(out); err != nil {
		panic(err)
	}
	var got []memdx.Packet
	var buf []byte
	tmp := make([]byte, 4096)
	for len(got) < len(reqs) {
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
			got = append(got, p)
			buf = buf[size:]
		}
	}
	return got
}
