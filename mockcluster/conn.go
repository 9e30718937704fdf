package mockcluster

import (
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// maxBody is the largest request body a node reads; a larger one closes the
// connection (the server disconnects such clients too).
const maxBody = memdx.DefaultMaxBodyLength

// maxValue is the largest document value (20 MiB); larger ones get E2BIG.
const maxValue = 20 << 20

// maxSnappyInflated is the most a snappy value may inflate to (30 MiB,
// kv_engine's DEFAULT_MAX_INFLATED_SIZE): up to it, a value over maxValue
// inflates and then answers E2BIG; beyond it, the server refuses to inflate
// and answers EINVAL.
const maxSnappyInflated = 30 << 20

// conn is one client connection. One goroutine (serve) reads requests and
// handles them in order, appending responses to wbuf, and writes wbuf when
// the read buffer holds no further complete request. Delayed answers in
// unordered mode and synchronous-write completions append from timers, under
// wmu.
type conn struct {
	n  *Node
	c  *Cluster
	nc net.Conn

	wmu     sync.Mutex
	wbuf    []byte
	known   memdx.ClusterConfigVersion // the config version the client knows
	hasKnow bool
	timers  map[*time.Timer]struct{}
	wclosed bool
	// hungUp, when not nil, is closed when the answers written before a
	// hang-up (hangUp) are out, or failed to go.
	hungUp chan struct{}
	// owed counts the answers an unordered connection still owes (delayed
	// by a fault, a synchronous write or a range scan's seqno wait); idle,
	// when not nil, is closed when it drops to zero (barrier.go).
	owed int
	idle chan struct{}

	done      chan struct{}
	closeOnce sync.Once
	// exited is closed when the serve goroutine has returned: nothing from
	// this connection is applied any more.
	exited chan struct{}

	features atomic.Uint64 // bit f set when HELLO feature f was granted
	authed   atomic.Bool
	user     atomic.Pointer[user]
	bucket   atomic.Pointer[Bucket]

	// Used only by the serve goroutine. pkt holds the request being handled
	// (in the conn so that handing its address around allocates nothing).
	pkt  memdx.Packet
	euid *user // the user the request being handled impersonates, if any
	// euidExtra are the privileges the request grants euid
	// (ImpersonateUserExtraPrivilege frame infos). A step of an earlier
	// request that runs later, with wmu held, runs with its own request's
	// (conn.as).
	euidExtra []string
	scram     *memdx.ScramServer
	scratch   []byte

	timing reqTiming // server durations (tracing.go); guarded by wmu
}

func newConn(n *Node, nc net.Conn) *conn {
	return &conn{n: n, c: n.c, nc: nc, done: make(chan struct{}), exited: make(chan struct{}), timers: make(map[*time.Timer]struct{}),
		wbuf: make([]byte, 0, 16<<10), scratch: make([]byte, 0, 256)}
}

func (cn *conn) has(f memdx.HelloFeature) bool {
	return f < 64 && cn.features.Load()&(1<<f) != 0
}

// outcome tells serve what to do after a request was handled.
type outcome struct {
	// close: write what is buffered, then close the connection.
	close bool
	// delay or wait (ordered execution, or a barrier): write what is
	// buffered, hold the connection for delay or until wait is closed,
	// then run then (with wmu held) before reading on.
	delay time.Duration
	wait  <-chan struct{}
	then  func()
	// next, after the hold, runs the request (with wmu held); its outcome
	// is served in turn. A barrier command waiting for the earlier ones
	// uses it.
	next func() outcome
	// barrier: the request may not be reordered; no later one starts
	// before its answer is out.
	barrier bool
}

func (cn *conn) serve() {
	defer cn.c.wg.Done()
	defer close(cn.exited)
	defer cn.closeAfterHangUp()
	buf := make([]byte, 32<<10)
	start, end := 0, 0
	for {
		for end-start >= memdx.HeaderSize {
			h, err := memdx.DecodeHeader(buf[start:end], maxBody)
			if err != nil {
				cn.c.logf("mockcluster: node %d: closing connection: %v", cn.n.id, err)
				_ = cn.flush()
				return
			}
			size := h.PacketLen()
			if end-start < size {
				if size > len(buf) {
					nb := make([]byte, size+size/4)
					end = copy(nb, buf[start:end])
					start, buf = 0, nb
				}
				break
			}
			var err2 error
			cn.pkt, _, err2 = memdx.DecodePacket(buf[start:start+size], maxBody)
			start += size
			if err2 != nil { // unreachable: the header was checked
				_ = cn.flush()
				return
			}
			cn.wmu.Lock()
			if cn.wclosed {
				// Closed (node stopped, connections dropped) while
				// requests were still buffered: a closed connection
				// applies nothing more, as a crashed server would not.
				cn.wmu.Unlock()
				return
			}
			out := cn.dispatchTimed(&cn.pkt)
			// Closed while handling: hung up on (hangUp), or stopped.
			hungUp := cn.wclosed
			cn.wmu.Unlock()
			barrier := out.barrier
			for {
				if out.close || hungUp {
					_ = cn.flush()
					return
				}
				if out.delay > 0 || out.wait != nil {
					if cn.flush() != nil || !cn.hold(out) {
						return
					}
				}
				if out.next == nil {
					break
				}
				cn.wmu.Lock()
				if cn.wclosed {
					cn.wmu.Unlock()
					return
				}
				out = cn.runTimed(&cn.pkt, out.next)
				hungUp = cn.wclosed
				cn.wmu.Unlock()
			}
			// A barrier command whose answer is delayed holds the
			// commands after it until it is out.
			if barrier && !cn.waitOwed() {
				return
			}
		}
		if cn.flush() != nil {
			return
		}
		if start == end {
			start, end = 0, 0
		} else if start > 0 && len(buf)-end < memdx.HeaderSize*4 {
			end = copy(buf, buf[start:end])
			start = 0
		}
		if end == len(buf) {
			nb := make([]byte, 2*len(buf))
			end = copy(nb, buf[start:end])
			start, buf = 0, nb
		}
		nr, err := cn.nc.Read(buf[end:])
		end += nr
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				cn.c.logf("mockcluster: node %d: read: %v", cn.n.id, err)
			}
			return
		}
	}
}

// hold waits as an ordered connection does while a command is blocked. It
// reports false when the connection closed meanwhile.
func (cn *conn) hold(out outcome) bool {
	if out.wait != nil {
		select {
		case <-out.wait:
		case <-cn.done:
			return false
		}
	} else {
		t := time.NewTimer(out.delay)
		select {
		case <-t.C:
		case <-cn.done:
			t.Stop()
			return false
		}
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if out.then != nil && !cn.wclosed {
		out.then()
	}
	return true
}

// later runs fn (which appends a response) after d on a timer and writes it:
// the unordered-execution form of a delayed answer. wmu must be held.
func (cn *conn) later(d time.Duration, fn func()) {
	if cn.wclosed { // closed while this request was being handled
		return
	}
	var t *time.Timer
	cn.owe()
	t = time.AfterFunc(d, func() {
		cn.wmu.Lock()
		defer cn.wmu.Unlock()
		if cn.wclosed {
			return
		}
		delete(cn.timers, t)
		fn()
		cn.paid()
		_ = cn.flushLocked()
	})
	cn.timers[t] = struct{}{}
}

// laterUntil is later with the answer held until release is closed (or
// the connection closes). wmu must be held.
func (cn *conn) laterUntil(release <-chan struct{}, fn func()) {
	if cn.wclosed {
		return
	}
	cn.owe()
	go func() {
		select {
		case <-release:
		case <-cn.done:
			return
		}
		cn.wmu.Lock()
		defer cn.wmu.Unlock()
		if cn.wclosed {
			return
		}
		fn()
		cn.paid()
		_ = cn.flushLocked()
	}()
}

func (cn *conn) flush() error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	return cn.flushLocked()
}

func (cn *conn) flushLocked() error {
	if len(cn.wbuf) == 0 {
		return nil
	}
	if cn.wclosed {
		cn.wbuf = cn.wbuf[:0]
		return net.ErrClosed
	}
	_, err := cn.nc.Write(cn.wbuf)
	if cap(cn.wbuf) > 1<<20 {
		cn.wbuf = make([]byte, 0, 16<<10)
	} else {
		cn.wbuf = cn.wbuf[:0]
	}
	if err != nil {
		cn.wclosed = true
		cn.nc.Close()
		// The rest of close needs wmu. Its done releases a serve
		// goroutine waiting for answers still owed (a barrier), which
		// the answers' callbacks, finding the connection closed, no
		// longer count as sent.
		go cn.close()
	}
	return err
}

// close closes the connection: once it returns, no further request of it
// is dispatched (one being handled finishes first, under wmu). The serve
// goroutine may still be returning; closeConns waits for it.
func (cn *conn) close() {
	cn.closeOnce.Do(func() {
		close(cn.done)
		cn.nc.Close()
		cn.wmu.Lock()
		cn.wclosed = true
		for t := range cn.timers {
			t.Stop()
		}
		cn.timers = nil
		cn.wmu.Unlock()
		cn.n.forget(cn)
	})
}

// closeConns closes the connections and waits until their serve goroutines
// have returned. It must not run on one of those goroutines.
func closeConns(conns []*conn) {
	for _, cn := range conns {
		cn.close()
	}
	for _, cn := range conns {
		<-cn.exited
	}
}

// notify sends a cluster-map change notification if the connection asked
// for them, still uses the bucket, and does not know this version yet
// (brief notifications carry no config).
func (cn *conn) notify(bucket string, ver memdx.ClusterConfigVersion, config, snappyConfig []byte) {
	brief := cn.has(memdx.FeatureClustermapChangeNotificationBrief)
	if !brief && !cn.has(memdx.FeatureClustermapChangeNotification) {
		return
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if cn.wclosed {
		return
	}
	if b := cn.bucket.Load(); (b == nil && bucket != "") || (b != nil && b.name != bucket) {
		return
	}
	if cn.hasKnow && !newer(ver, cn.known) {
		return
	}
	cn.known, cn.hasKnow = ver, true
	var ext [16]byte
	putUint64(ext[0:8], uint64(ver.Epoch))
	putUint64(ext[8:16], uint64(ver.Revision))
	p := memdx.Packet{Magic: memdx.MagicServerReq, ServerOpCode: memdx.ServerOpClustermapChangeNotification,
		Extras: ext[:], Key: []byte(bucket)}
	if !brief {
		p.Value, p.Datatype = cn.configBody(config, snappyConfig)
	}
	cn.wbuf, _ = memdx.AppendPacket(cn.wbuf, &p)
	_ = cn.flushLocked()
}

// newer reports whether version a is newer than b: epoch first, then
// revision.
func newer(a, b memdx.ClusterConfigVersion) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	return a.Revision > b.Revision
}

// learn records that the client knows version v (if newer than what it
// knew). wmu must be held.
func (cn *conn) learn(v memdx.ClusterConfigVersion) {
	if !cn.hasKnow || newer(v, cn.known) {
		cn.known, cn.hasKnow = v, true
	}
}

func putUint64(b []byte, v uint64) {
	_ = b[7]
	b[0], b[1], b[2], b[3] = byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32)
	b[4], b[5], b[6], b[7] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

func putUint32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

func getUint32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func getUint64(b []byte) uint64 {
	return uint64(getUint32(b[0:4]))<<32 | uint64(getUint32(b[4:8]))
}

// outDatatype masks a value's datatype with what the client negotiated.
func (cn *conn) outDatatype(dt memdx.Datatype) memdx.Datatype {
	if !cn.has(memdx.FeatureJSON) {
		dt &^= memdx.DatatypeJSON
	}
	if !cn.has(memdx.FeatureSnappy) {
		dt &^= memdx.DatatypeSnappy
	}
	return dt
}

// reply appends a response to p. wmu must be held.
func (cn *conn) reply(p *memdx.Packet, st memdx.Status, cas uint64, dt memdx.Datatype, extras, key, value []byte) {
	if st != memdx.StatusSuccess && st != memdx.StatusAuthContinue {
		cn.n.countError(st)
	}
	rp := memdx.Packet{Magic: memdx.MagicRes, OpCode: p.OpCode, Datatype: dt, Status: st,
		Opaque: p.Opaque, Cas: cas, Extras: extras, Key: key, Value: value}
	cn.appendResponse(p, &rp)
}

func (cn *conn) ok(p *memdx.Packet) { cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, nil) }

// statusLockedTmpfail stands for kv_engine's engine code locked_tmpfail
// inside the mock, never on the wire: a client with XERROR sees it as
// LOCKED, one without as TMPFAIL. memdx.StatusLocked stands for the engine
// code locked, which a client without XERROR sees as KEY_EEXISTS.
// kv_engine answers locked_tmpfail to GET_LOCKED of a locked document
// (GetLockedCommandContext), UNLOCK_KEY with a wrong CAS
// (KVBucket::unlockKey), DELETE with a wrong CAS (VBucket::deleteItem) and
// a sub-document command without a CAS (get_document_for_searching); and
// locked to other mutations (VBucket::set, the append/prepend and remove
// contexts) and to TOUCH/GAT (getAndTouchInner).
const statusLockedTmpfail memdx.Status = 0xff09

// mapStatus turns the mock's statuses into the ones a client gets:
// statuses a client that did not negotiate XERROR cannot know become the
// ones kv_engine sends such clients (Connection::remapErrorCode: locked is
// KEY_EEXISTS; locked_tmpfail, not_locked and the sync-write statuses
// TMPFAIL).
func (cn *conn) mapStatus(st memdx.Status) memdx.Status {
	if cn.has(memdx.FeatureXerror) {
		if st == statusLockedTmpfail {
			return memdx.StatusLocked
		}
		return st
	}
	switch st {
	case memdx.StatusLocked:
		return memdx.StatusKeyExists
	case statusLockedTmpfail, memdx.StatusNotLocked, memdx.StatusSyncWriteInProgress,
		memdx.StatusSyncWriteReCommitInProgress:
		return memdx.StatusTmpFail
	}
	return st
}

// fail answers p with an error status. With a context the body is
// {"error":{"context":"..."}} (datatype JSON when the client negotiated
// JSON), XERROR or not: kv_engine's Cookie::sendResponse (daemon/cookie.cc)
// puts the error JSON in every error response, and the connection's
// features only mask its datatype (Connection::getEnabledDatatypes).
func (cn *conn) fail(p *memdx.Packet, st memdx.Status, context string) {
	st = cn.mapStatus(st)
	if context == "" {
		cn.reply(p, st, 0, 0, nil, nil, nil)
		return
	}
	body := appendErrorJSON(nil, context, "")
	cn.reply(p, st, 0, cn.outDatatype(memdx.DatatypeJSON), nil, nil, body)
}

// failPrivilege answers EACCESS for a request its user lacks privilege for,
// as kv_engine's Cookie::checkPrivilege (daemon/cookie.cc) words it, with
// the event id (a random UUID) getPrivilegeFailedErrorMessage adds as the
// error's "ref".
func (cn *conn) failPrivilege(p *memdx.Packet, privilege string) {
	st := cn.mapStatus(memdx.StatusNoAccess)
	ctx := "Authorization failure: can't execute " + p.OpCode.String() + " operation without the " +
		privilege + " privilege"
	body := appendErrorJSON(nil, ctx, newUUID())
	cn.reply(p, st, 0, cn.outDatatype(memdx.DatatypeJSON), nil, nil, body)
}

// newUUID returns a random version 4 UUID in its text form.
func newUUID() string {
	var u [16]byte
	putUint64(u[0:8], randUint64())
	putUint64(u[8:16], randUint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// failExec answers a status a command's execution ended with, as
// kv_engine's handle_executor_status does: through
// Connection::remapErrorCode, which closes the connection of a client
// without XERROR instead of answering it a status it cannot know
// (unknownWithoutXerror: NO_BUCKET, EACCESS, DURABILITY_IMPOSSIBLE,
// SYNC_WRITE_AMBIGUOUS...). (A packet the validator refused is answered
// its status whatever the client negotiated: use fail.) It may run off the
// serve goroutine, for an answer given later (a synchronous write's).
func (cn *conn) failExec(p *memdx.Packet, st memdx.Status, context string) {
	if !cn.has(memdx.FeatureXerror) && unknownWithoutXerror(st) {
		cn.hangUp(p, st)
		return
	}
	cn.fail(p, st, context)
}

// unknownWithoutXerror reports whether remapErrorCode (daemon/connection.cc)
// turns st, a status an execution ended with, into disconnect for a client
// without XERROR.
func unknownWithoutXerror(st memdx.Status) bool {
	switch st {
	case memdx.StatusNoAccess, memdx.StatusNoBucket, memdx.StatusAuthStale,
		memdx.StatusDurabilityInvalidLevel, memdx.StatusDurabilityImpossible,
		memdx.StatusSyncWriteAmbiguous, memdx.StatusVbUUIDNotEqual,
		memdx.StatusCancelled, memdx.StatusChecksumMismatch:
		return true
	}
	return false
}

// hangUp closes the connection instead of answering p st (remapErrorCode's
// disconnect): the answers already buffered go out first. wmu must be
// held. The serve goroutine finds the connection closed when the handling
// returns, or its next read or wait ends.
//
// The buffered answers are written, and the connection then closed, on a
// goroutine of its own: hangUp may run under a fault ordering lock (a
// request judged by a fault is handled under it; see applyFaults), and a
// client that does not read would otherwise hold it, and with it other
// connections of the cluster (every one, for a request without a key).
// The serve goroutine waits for that write before it returns (closeAfterHangUp),
// so that it does not close the socket under it.
func (cn *conn) hangUp(p *memdx.Packet, st memdx.Status) {
	cn.c.logf("mockcluster: node %d: closing connection: %s to %s, XERROR not enabled", cn.n.id, st, p.OpCode)
	if cn.wclosed {
		// The rest of close (done, timers, the node's count) needs wmu: a
		// serve goroutine waiting for answers still owed (a barrier) is
		// released by done, not by the closed socket.
		go cn.close()
		return
	}
	// wbuf keeps the answers (its length is a mark to applyFaults, whose
	// caller is still running), but nothing more is written once the
	// connection is closed.
	cn.wclosed = true
	out := append([]byte(nil), cn.wbuf...)
	done := make(chan struct{})
	cn.hungUp = done
	go func() {
		defer close(done)
		if len(out) > 0 {
			_, _ = cn.nc.Write(out)
		}
		cn.close()
	}()
}

// closeAfterHangUp closes the connection when its serve goroutine returns,
// after the answers a hang-up writes (a close, by Stop or DropConnections,
// ends that write).
func (cn *conn) closeAfterHangUp() {
	cn.wmu.Lock()
	h := cn.hungUp
	cn.wmu.Unlock()
	if h != nil {
		<-h
	}
	cn.close()
}

// refusePrivilege is failPrivilege for a command the privilege check
// before its execution refuses (execute_client_request_packet in
// daemon/mcbp_executors.cc remaps the failure as failExec does).
func (cn *conn) refusePrivilege(p *memdx.Packet, privilege string) {
	if !cn.has(memdx.FeatureXerror) {
		cn.hangUp(p, memdx.StatusNoAccess)
		return
	}
	cn.failPrivilege(p, privilege)
}

// failManifest answers UNKNOWN_COLLECTION or UNKNOWN_SCOPE with the
// manifest uid the decision was made against: {"manifest_uid":"<hex>"}, plus
// the error context (Cookie::setUnknownCollectionErrorContext).
func (cn *conn) failManifest(p *memdx.Packet, st memdx.Status, uid uint64, context string) {
	b := []byte(`{`)
	if context != "" {
		b = append(b, `"error":{"context":`...)
		b = appendJSONString(b, context)
		b = append(b, `},`...)
	}
	b = append(b, `"manifest_uid":"`...)
	b = append(b, uidString(uid)...)
	b = append(b, `"}`...)
	cn.reply(p, st, 0, cn.outDatatype(memdx.DatatypeJSON), nil, nil, b)
}

// failManifestExec is failManifest for a status an execution ended with
// (handle_executor_status): Connection::remapErrorCode answers a client
// that did not negotiate Collections EINVAL instead of UNKNOWN_COLLECTION
// or UNKNOWN_SCOPE, the body (the manifest uid the engine set) unchanged.
func (cn *conn) failManifestExec(p *memdx.Packet, st memdx.Status, uid uint64, context string) {
	if !cn.has(memdx.FeatureCollections) {
		st = memdx.StatusInvalidArgs
	}
	cn.failManifest(p, st, uid, context)
}

func appendErrorJSON(b []byte, context, ref string) []byte {
	b = append(b, `{"error":{"context":`...)
	b = appendJSONString(b, context)
	if ref != "" {
		b = append(b, `,"ref":`...)
		b = appendJSONString(b, ref)
	}
	return append(b, `}}`...)
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// nmv answers NOT_MY_VBUCKET with the bucket's config for this node, left
// out when the client negotiated DedupeNotMyVbucketClustermap and already
// knows that version.
func (cn *conn) nmv(p *memdx.Packet, s *bucketSnap) {
	v := s.version()
	if cn.has(memdx.FeatureDedupeNotMyVbucketClustermap) && cn.hasKnow && !newer(v, cn.known) {
		cn.reply(p, memdx.StatusNotMyVbucket, 0, 0, nil, nil, nil)
		return
	}
	cn.learn(v)
	body, dt := cn.configBody(s.json[cn.n.id], s.snappy[cn.n.id])
	cn.reply(p, memdx.StatusNotMyVbucket, 0, dt, nil, nil, body)
}

// configBody picks the form of a config a response or notification carries:
// once SnappyEverywhere is negotiated kv_engine sends the compressed config
// with datatype JSON|SNAPPY, in GET_CLUSTER_CONFIG answers
// (daemon/protocol/mcbp/cluster_config_executor.cc), NOT_MY_VBUCKET bodies
// (daemon/cookie.cc, Cookie::sendNotMyVBucket) and full cluster-map change
// notifications (push_cluster_config); otherwise the JSON text.
func (cn *conn) configBody(json, snappyJSON []byte) ([]byte, memdx.Datatype) {
	if cn.has(memdx.FeatureSnappyEverywhere) && snappyJSON != nil {
		return snappyJSON, cn.outDatatype(memdx.DatatypeJSON | memdx.DatatypeSnappy)
	}
	return json, cn.outDatatype(memdx.DatatypeJSON)
}

// dispatch handles one request with wmu held.
func (cn *conn) dispatch(p *memdx.Packet) outcome {
	switch p.Magic {
	// A request in alternative framing (magic 0x08) is served whatever the
	// connection's HELLO said: kv_engine's HELLO records AltRequestSupport
	// as "only informative" (daemon/protocol/mcbp/hello_packet_executor.cc),
	// Cookie::validate (daemon/cookie.cc) checks only that the magic is a
	// known one, and McbpValidator::verify_header (daemon/mcbp_validators.cc)
	// judges the frame infos themselves, never the HELLO. libcouchbase sends
	// durable writes so on its bootstrap connection, which does not ask for
	// AltRequestSupport.
	case memdx.MagicReq, memdx.MagicReqExt:
	case memdx.MagicServerRes:
		return outcome{} // the client's reply to a server request: nothing to do
	default:
		cn.c.logf("mockcluster: node %d: closing connection: a client sent magic %s", cn.n.id, p.Magic)
		return outcome{close: true}
	}
	cn.n.reqs[p.OpCode].Add(1)
	if !cn.isBarrier(p) {
		return cn.control(p)
	}
	if cn.rejected(p) {
		// Refused by the validator: answered at once, holding nothing.
		return cn.control(p)
	}
	if owed := cn.owedDone(); owed != nil {
		return outcome{wait: owed, next: func() outcome { return cn.control(p) }, barrier: true}
	}
	out := cn.control(p)
	out.barrier = true
	return out
}

// control applies a matching fault, if any, around handle. Without a
// fault registered the request is handled unjudged, with the faults'
// ordering lock read-locked: a fault registered meanwhile waits for it
// (faultRegistry.add).
func (cn *conn) control(p *memdx.Packet) outcome {
	r := &cn.c.faults
	r.order.all.RLock()
	if r.count.Load() == 0 {
		defer r.order.all.RUnlock()
		if testHookUnjudged != nil {
			testHookUnjudged(p)
		}
		return cn.handle(p)
	}
	r.order.all.RUnlock()
	return cn.applyFaults(p)
}

// testHookUnjudged, when set (by tests), runs before a request handled
// without a fault registered.
var testHookUnjudged func(p *memdx.Packet)
