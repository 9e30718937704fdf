package memdx_test

import (
	"errors"
	"fmt"

	"github.com/kvwire/kvwire/memdx"
)

// A request is built once and encoded with the opaque the connection picks;
// the buffer is reused from one request to the next.
func ExampleRequest_AppendTo() {
	req := memdx.NewStore(memdx.OpSet, []byte("airline_10"), []byte(`{"name":"40-Mile Air"}`), 0x02000000, 0)
	req.Datatype = memdx.DatatypeJSON
	req.Vbucket = 41
	req.Collections, req.CollectionID = true, 8 // HELLO Collections was negotiated
	req.Durability = memdx.DurabilityMajority   // a synchronous write: flexible framing

	buf := make([]byte, 0, 256)
	buf, err := req.AppendTo(buf, 7)
	if err != nil {
		panic(err)
	}
	fmt.Printf("magic 0x%02x, %d bytes (EncodedLen %d)\n", buf[0], len(buf), req.EncodedLen())
	// Output: magic 0x08, 67 bytes (EncodedLen 67)
}

// A reader asks PacketSize once it has a header, waits for that many bytes,
// then decodes; the packet's slices alias the read buffer.
func ExampleDecodePacket() {
	stream := []byte{
		0x81, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, // GET response, 4 bytes of extras, SUCCESS
		0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x07, // body 9, opaque 7
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // CAS 1
		0xde, 0xad, 0xbe, 0xef, 'W', 'o', 'r', 'l', 'd',
		0x81, 0x00, // the start of the next packet
	}
	n, err := memdx.PacketSize(stream, 0)
	if err != nil {
		panic(err)
	}
	p, _, err := memdx.DecodePacket(stream[:n], 0)
	if err != nil {
		panic(err)
	}
	flags, _ := memdx.DecodeGetFlags(&p)
	fmt.Printf("%s %s opaque %d cas %d flags %#x value %q\n", p.OpCode, p.Status, p.Opaque, p.Cas, flags, p.Value)

	_, _, err = memdx.DecodePacket(stream[n:], 0)
	fmt.Println(errors.Is(err, memdx.ErrShortBuffer))
	// Output:
	// GET SUCCESS opaque 7 cas 1 flags 0xdeadbeef value "World"
	// true
}

// Errors from responses match the Status constants.
func ExampleNewStatusError() {
	p := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGet, Status: memdx.StatusKeyNotFound}
	err := fmt.Errorf("get airline_10: %w", memdx.NewStatusError(&p))
	fmt.Println(errors.Is(err, memdx.StatusKeyNotFound))
	fmt.Println(err)
	// Output:
	// true
	// get airline_10: GET failed with status KEY_ENOENT (0x01)
}

// SCRAM is a pure state machine: feed it the server's messages.
func ExampleScramClient() {
	c, _ := memdx.NewScramClient(memdx.MechScramSHA1, "user", "pencil",
		func() (string, error) { return "fyko+d2lbbFgONRv9qkxdawL", nil })
	fmt.Printf("SASL_AUTH %s\n", c.ClientFirst())
	final, _ := c.ClientFinal([]byte("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"))
	fmt.Printf("SASL_STEP %s\n", final)
	fmt.Println(c.VerifyServerFinal([]byte("v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")))
	// Output:
	// SASL_AUTH n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL
	// SASL_STEP c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=
	// <nil>
}

// Sub-document lookups: specs go in, results come back in spec order.
func ExampleNewSubdocMultiLookup() {
	ops := []memdx.SubdocLookupOp{
		{Op: memdx.OpSubdocGet, Path: []byte("name")},
		{Op: memdx.OpSubdocExists, Path: []byte("iata")},
	}
	req := memdx.NewSubdocMultiLookup([]byte("airline_10"), 0, ops)
	b, _ := req.AppendTo(nil, 1)
	fmt.Printf("%s, %d bytes\n", req.OpCode, len(b))

	// What a server answers: one result per spec.
	body := memdx.AppendSubdocLookupResult(nil, memdx.StatusSuccess, []byte(`"40-Mile Air"`))
	body = memdx.AppendSubdocLookupResult(body, memdx.StatusSubdocPathNotFound, nil)
	res, _ := memdx.DecodeSubdocMultiLookup(body, nil)
	for i, r := range res {
		fmt.Printf("%s: %s %s\n", ops[i].Path, r.Status, r.Value)
	}
	// Output:
	// SUBDOC_MULTI_LOOKUP, 50 bytes
	// name: SUCCESS "40-Mile Air"
	// iata: SUBDOC_PATH_ENOENT
}
