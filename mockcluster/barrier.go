package mockcluster

// Barriers on a connection with UnorderedExecution: kv_engine may answer
// such a connection's commands out of order, but a command it may not
// reorder waits until every earlier command has finished, and no later
// command starts before it is done (Cookie::validateClientRequest sets the
// barrier for an opcode outside is_reorder_supported, parseFrameExtras for
// the Barrier frame info; Connection::executeCommandPipeline and
// processAllReadyCookies in daemon/connection.cc hold the pipeline). The
// mock answers all but a few commands at once; those it answers later
// (a fault's Delay or Hold, a synchronous write, a range scan waiting for
// a seqno) are what a barrier waits for.

import "github.com/kvwire/kvwire/memdx"

// reorderable are the opcodes kv_engine may reorder (is_reorder_supported
// in include/mcbp/protocol/opcode.h's OpcodeInfo table): every other
// opcode, the quiet ones included, is a barrier.
var reorderable = func() [256]bool {
	var r [256]bool
	for _, op := range []memdx.OpCode{
		memdx.OpGet, memdx.OpGetK, memdx.OpGetLocked, memdx.OpUnlockKey, memdx.OpTouch, memdx.OpGAT,
		memdx.OpDelete, memdx.OpIncrement, memdx.OpDecrement, memdx.OpEvictKey, memdx.OpGetReplica,
		memdx.OpAdd, memdx.OpSet, memdx.OpReplace, memdx.OpAppend, memdx.OpPrepend,
		memdx.OpSubdocGet, memdx.OpSubdocExists, memdx.OpSubdocDictAdd, memdx.OpSubdocDictUpsert,
		memdx.OpSubdocDelete, memdx.OpSubdocReplace, memdx.OpSubdocArrayPushLast,
		memdx.OpSubdocArrayPushFirst, memdx.OpSubdocArrayInsert, memdx.OpSubdocArrayAddUnique,
		memdx.OpSubdocCounter, memdx.OpSubdocMultiLookup, memdx.OpSubdocMultiMutation,
		memdx.OpSubdocGetCount, memdx.OpSubdocReplaceBodyWithXattr, memdx.OpRangeScanCreate,
	} {
		r[op] = true
	}
	return r
}()

// isBarrier reports whether p, on this connection, waits for the commands
// before it. wmu must be held.
func (cn *conn) isBarrier(p *memdx.Packet) bool {
	if !cn.has(memdx.FeatureUnorderedExecution) {
		return false // an ordered connection runs one command at a time
	}
	if !reorderable[p.OpCode] {
		return true
	}
	barrier := false
	_ = memdx.FrameInfos(p.FramingExtras, func(id uint16, _ []byte) error {
		barrier = barrier || memdx.RequestFrameID(id) == memdx.FrameBarrier
		return nil
	})
	return barrier
}

// owe counts an answer the connection will send later. wmu must be held.
func (cn *conn) owe() { cn.owed++ }

// paid counts an owed answer sent. wmu must be held.
func (cn *conn) paid() {
	cn.owed--
	if cn.owed == 0 && cn.idle != nil {
		close(cn.idle)
		cn.idle = nil
	}
}

// owedDone returns nil when no answer is owed, else a channel closed once
// they all were sent. wmu must be held.
func (cn *conn) owedDone() <-chan struct{} {
	if cn.owed == 0 {
		return nil
	}
	if cn.idle == nil {
		cn.idle = make(chan struct{})
	}
	return cn.idle
}

// waitOwed writes what is buffered and waits until no answer is owed. It
// reports false when the connection closed meanwhile.
func (cn *conn) waitOwed() bool {
	cn.wmu.Lock()
	owed := cn.owedDone()
	cn.wmu.Unlock()
	if owed == nil {
		return true
	}
	if cn.flush() != nil {
		return false
	}
	select {
	case <-owed:
		return true
	case <-cn.done:
		return false
	}
}
