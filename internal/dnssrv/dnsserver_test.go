package dnssrv

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
)

// loopbackDNS is a DNS server on 127.0.0.1 (UDP) that answers SRV queries
// from a table, so that tests run the Go resolver itself (its parsing,
// validation and priority ordering) and send nothing beyond the loopback.
// A name in silent gets no answer at all; any other name not in srv is
// NXDOMAIN.
type loopbackDNS struct {
	conn   *net.UDPConn
	srv    map[string][]*net.SRV // by lower-case name, without the trailing dot
	silent map[string]bool

	mu    sync.Mutex
	asked []string
}

func newLoopbackDNS(t *testing.T, srv map[string][]*net.SRV, silent ...string) *loopbackDNS {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	d := &loopbackDNS{conn: conn, srv: srv, silent: map[string]bool{}}
	for _, s := range silent {
		d.silent[s] = true
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.serve()
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return d
}

// resolver is a Go resolver whose every query goes to d, whatever the
// machine's resolver configuration names.
func (d *loopbackDNS) resolver() *net.Resolver {
	addr := d.conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "udp", addr)
	}}
}

func (d *loopbackDNS) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.asked...)
}

func (d *loopbackDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if resp := d.answer(buf[:n]); resp != nil {
			d.conn.WriteToUDP(resp, from)
		}
	}
}

// answer is the response to query (nil: none, or a query it cannot read).
func (d *loopbackDNS) answer(query []byte) []byte {
	if len(query) < 12 || binary.BigEndian.Uint16(query[4:]) != 1 {
		return nil
	}
	// The question: labels up to the root, then type and class.
	var labels []string
	i := 12
	for {
		if i >= len(query) {
			return nil
		}
		l := int(query[i])
		i++
		if l == 0 {
			break
		}
		if l&0xC0 != 0 || i+l > len(query) {
			return nil
		}
		labels = append(labels, string(query[i:i+l]))
		i += l
	}
	if i+4 > len(query) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(query[i:])
	question := query[12 : i+4]
	name := strings.ToLower(strings.Join(labels, "."))
	d.mu.Lock()
	d.asked = append(d.asked, name)
	d.mu.Unlock()
	if d.silent[name] {
		return nil
	}
	recs, ok := d.srv[name]
	resp := make([]byte, 12, 512)
	copy(resp, query[:2])                   // id
	resp[2] = 0x80 | 0x04 | query[2]&0x01   // QR, AA, RD as asked
	resp[3] = 0x80                          // RA
	binary.BigEndian.PutUint16(resp[4:], 1) // one question
	if !ok {
		resp[3] |= 3 // NXDOMAIN
	}
	resp = append(resp, question...)
	if !ok || qtype != 33 {
		return resp
	}
	binary.BigEndian.PutUint16(resp[6:], uint16(len(recs)))
	for _, r := range recs {
		var rdata []byte
		rdata = binary.BigEndian.AppendUint16(rdata, r.Priority)
		rdata = binary.BigEndian.AppendUint16(rdata, r.Weight)
		rdata = binary.BigEndian.AppendUint16(rdata, r.Port)
		for _, l := range strings.Split(strings.TrimSuffix(r.Target, "."), ".") {
			if l != "" {
				rdata = append(rdata, byte(len(l)))
				rdata = append(rdata, l...)
			}
		}
		rdata = append(rdata, 0)
		resp = append(resp, 0xC0, 12) // the question's name
		resp = binary.BigEndian.AppendUint16(resp, 33)
		resp = binary.BigEndian.AppendUint16(resp, 1)
		resp = binary.BigEndian.AppendUint32(resp, 60)
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
		resp = append(resp, rdata...)
	}
	return resp
}
