// Package faultnode is a scripted faulty KV node for tests: it stands between
// a client and a real (mock) node, or stands in for a node by itself, and
// misbehaves on command.
//
// A Proxy (NewProxy) listens on 127.0.0.1 and relays every client connection
// to an upstream node packet by packet, framed with memdx. While it runs, the
// test switches faults on and off; each applies at once to every current and
// future connection:
//
//   - Blackhole: read the client's requests and the node's responses, and
//     pass on neither (a paused process, a network black hole). What is read
//     during the black hole is dropped for good: turning it off resumes the
//     relay with the next packet, and the requests read meanwhile are never
//     answered.
//   - DuplicateResponses: send a matching response twice, the copy at once
//     or after a delay.
//   - Inject, InjectResponse: write raw bytes (garbage, bad magic,
//     impossible lengths) or a response (a stray opaque) to the clients.
//   - StallNextResponse: write the first n bytes of the next response, hold
//     the rest until Release.
//   - Reset closes every client connection with a TCP RST; RefuseNew resets
//     new connections as soon as they are accepted (a dead server).
//   - OnRequest and OnResponse hooks see every packet and may drop it or
//     send other packets instead: answer locally without forwarding, turn
//     an answer into NOT_MY_VBUCKET with or without a config (NotMyVbucket),
//     into a huge body, or drop it.
//   - RewritePorts replaces the node's port by the proxy's in every config
//     the node sends, so a client that bootstraps through the proxy stays
//     on it (client.Connect included).
//
// A client connection whose first byte is not a binary magic is a text
// connection (memcached's ASCII protocol; memcached decides the same way):
// the proxy relays its bytes both ways as they come, without parsing them.
// Blackhole drops its bytes (counted by TextDropped, not Dropped), a stall
// holds part of the node's next read, and Reset, RefuseNew, Close, Inject
// and Conn.Write apply to it as to a binary connection; the hooks,
// DuplicateResponses, RewritePorts, NextRequest and the Requests and
// Forwarded counts see binary connections only. Accepted counts both.
//
// Conns lists the open connections; each can be written to (Conn.Write) or
// reset (Conn.Reset) on its own.
//
// Counters (Requests, Forwarded, Dropped, Accepted) count what passed, and
// NextRequest returns a channel that receives the next request with a given
// opcode, so tests wait for events instead of sleeping.
//
// A Server (NewServer) impersonates a node: it answers enough of the
// bootstrap for kvwire's conn.Dial to succeed (HELLO, GET_ERROR_MAP,
// SASL_LIST_MECHS, SASL_AUTH and SASL_STEP with PLAIN or SCRAM, SELECT_BUCKET,
// GET_CLUSTER_CONFIG with a scripted config, VERSION, NOOP) and hands every
// request to a Handler first, which may answer it any way it likes, or not
// at all. A connection to it whose first byte is not a binary magic is a
// text connection: it hands each line to a TextHandler first, and answers
// "version" itself.
//
// A SynHole (NewSynHole, Linux) is an address on 127.0.0.1 whose SYNs are
// dropped: a dial to it neither connects nor is refused, as across a
// partition or behind a firewall that drops packets.
//
// Close stops every goroutine the Proxy or Server started and closes every
// connection. faultnode imports only the standard library and memdx, so
// tests of conn, client and mockcluster can all use it.
package faultnode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/kvwire/kvwire/memdx"
)

// MaxBody is the largest packet body faultnode reads: larger than any real
// config or document, so huge-config tests pass through.
const MaxBody = 64 << 20

// StrayOpaque is an opaque for injected responses that match no request:
// kvwire hands out opaques from 1 upwards, so a connection would need four
// billion requests to reach it.
const StrayOpaque uint32 = 0xfa017bad

// Action is what a hook decides for one packet. The zero Action passes the
// packet on unchanged.
type Action struct {
	// Drop passes nothing on: a request is neither forwarded nor answered,
	// a response never reaches the client.
	Drop bool
	// Send, when non-nil, is written to the client instead of the packet
	// (a request is then not forwarded). Packets are encoded with
	// memdx.AppendPacket; one that cannot be encoded closes the connection.
	Send []memdx.Packet
}

// Reply builds a response to req with the given status and value. An
// answer to GETK or GETKQ with SUCCESS or KEY_ENOENT names req's key, as
// servers answer them.
func Reply(req *memdx.Packet, status memdx.Status, value []byte) memdx.Packet {
	p := memdx.Packet{Magic: memdx.MagicRes, OpCode: req.OpCode, Status: status, Opaque: req.Opaque, Value: value}
	if (req.OpCode == memdx.OpGetK || req.OpCode == memdx.OpGetKQ) &&
		(status == memdx.StatusSuccess || status == memdx.StatusKeyNotFound) {
		p.Key = req.Key
	}
	return p
}

// NotMyVbucket builds the NOT_MY_VBUCKET answer to req, carrying config as
// its body (nil for an answer without a config, as kv_engine sends when it
// believes the client has it already).
func NotMyVbucket(req *memdx.Packet, config []byte) memdx.Packet {
	p := Reply(req, memdx.StatusNotMyVbucket, config)
	if len(config) > 0 {
		p.Datatype = memdx.DatatypeJSON
	}
	return p
}

// Encode returns the bytes of pkts, for Inject and Conn.Write.
func Encode(pkts ...memdx.Packet) ([]byte, error) {
	var b []byte
	for i := range pkts {
		var err error
		if b, err = memdx.AppendPacket(b, &pkts[i]); err != nil {
			return nil, fmt.Errorf("faultnode: packet %d (%s): %w", i, pkts[i].OpCode, err)
		}
	}
	return b, nil
}

// packetReader reads whole packets from a stream.
type packetReader struct{ r *bufio.Reader }

func newPacketReader(r io.Reader) *packetReader { return &packetReader{bufio.NewReader(r)} }

// next returns the next packet, decoded, and its bytes. Each packet has its
// own buffer: the slices stay valid.
func (pr *packetReader) next() (memdx.Packet, []byte, error) {
	var h [memdx.HeaderSize]byte
	if _, err := io.ReadFull(pr.r, h[:]); err != nil {
		return memdx.Packet{}, nil, err
	}
	size, err := memdx.PacketSize(h[:], MaxBody)
	if err != nil {
		return memdx.Packet{}, nil, err
	}
	b := make([]byte, size)
	copy(b, h[:])
	if _, err := io.ReadFull(pr.r, b[memdx.HeaderSize:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return memdx.Packet{}, nil, err
	}
	p, _, err := memdx.DecodePacket(b, MaxBody)
	return p, b, err
}

// resetConn closes nc with a TCP RST when it is a TCP connection.
func resetConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	nc.Close()
}
