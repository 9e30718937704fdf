package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// lockstepJob is the ceiling of kvwire's shape at N goroutines, for
// context: N goroutines, each doing one blocking Get at a time on one
// shared connection, as kvwire's callers do, but batched with what a
// client cannot know, the number of its callers. The last of the N to
// queue its request writes all N in one write, so every write carries a
// whole window, as the raw N-window's does; a reader goroutine hands each
// goroutine its answer's value length on a channel of its own. There is
// nothing else: no value copy, no opaque table (the opaque is the
// goroutine's number), no deadline, cancel, retry or routing. What it pays
// over the raw window is what any blocking call per goroutine pays: each
// request's hand-off from its goroutine and back to it.
type lockstepJob struct {
	clientJob // its workers are the members (lockstepMember), its loop theirs
	addr      string

	nc      net.Conn
	answers []chan int // by goroutine: its answer's value length, or < 0 (ans*)
	readEnd chan struct{}

	mu      sync.Mutex
	out     []byte // the batch being queued
	spare   []byte // the other buffer, when no write has it
	waiting []int  // the goroutines whose requests are in out
	members int    // goroutines still in the loop
	err     error  // the write's or the read's; every Get fails after it
}

func newLockstepJob(addr string, conc int, ks *keyset) *lockstepJob {
	j := &lockstepJob{addr: addr}
	g := 0
	j.clientJob = clientJob{conc: conc, mix: mixGet, ks: ks, newWorker: func() worker {
		g++
		return lockstepMember{j, g - 1}
	}}
	return j
}

// The reader's answers that are not a value length.
const (
	ansFailed = -1 // the connection failed (lockstepJob.err)
	ansStatus = -2 // a status other than success
)

func (j *lockstepJob) prepare() error {
	if j.nc != nil {
		return nil
	}
	nc, err := dialRaw(j.addr)
	if err != nil {
		return err
	}
	j.nc, j.err = nc, nil
	j.answers = make([]chan int, j.conc)
	for g := range j.answers {
		j.answers[g] = make(chan int, 1)
	}
	j.out, j.spare = make([]byte, 0, j.conc*64), make([]byte, 0, j.conc*64)
	j.readEnd = make(chan struct{})
	go j.readLoop()
	return j.clientJob.prepare()
}

func (j *lockstepJob) close() {
	if j.nc == nil {
		return
	}
	_ = j.nc.Close()
	<-j.readEnd
	j.nc = nil
}

// run is clientJob's, the goroutines being the members from the start.
func (j *lockstepJob) run(gt *gate, recs []*recorder) (int64, error) {
	// A hung server must not hang the harness: one deadline for the run.
	_ = j.nc.SetDeadline(time.Now().Add(time.Minute))
	defer func() { _ = j.nc.SetDeadline(time.Time{}) }()
	j.mu.Lock()
	j.members = j.conc
	j.mu.Unlock()
	return j.clientJob.run(gt, recs)
}

// lockstepMember is one goroutine of the job, a worker of its clientJob.
type lockstepMember struct {
	j *lockstepJob
	g int
}

func (m lockstepMember) get(i int) error { return m.j.get(m.g, i) }

func (m lockstepMember) upsert(int) error { return errors.New("lockstep: Gets only") }

// leave: the goroutine stopped (clientJob.run).
func (m lockstepMember) leave() { m.j.leave() }

// get queues goroutine g's GET of key idx, writes the batch when g is the
// last member to queue, and waits for the answer.
func (j *lockstepJob) get(g, idx int) error {
	j.mu.Lock()
	if j.err != nil {
		err := j.err
		j.mu.Unlock()
		return err
	}
	req := memdx.NewGet(j.ks.bkeys[idx])
	out, err := req.AppendTo(j.out, uint32(g+1))
	if err != nil {
		j.mu.Unlock()
		return err
	}
	j.out = out
	j.waiting = append(j.waiting, g)
	batch := j.take()
	j.mu.Unlock()
	j.write(batch)
	switch n := <-j.answers[g]; {
	case n == ansStatus:
		return errors.New("lockstep GET: a status other than success")
	case n < 0:
		j.mu.Lock()
		err := j.err
		j.mu.Unlock()
		return err
	case n != len(j.ks.value):
		return errShortValue
	}
	return nil
}

// leave takes a goroutine that stopped out of the members: the others'
// batch may be whole without it. Called without mu.
func (j *lockstepJob) leave() {
	j.mu.Lock()
	j.members--
	batch := j.take()
	j.mu.Unlock()
	j.write(batch)
}

// take returns the batch when every member has queued its request (nil
// otherwise), and starts the next one. Called with mu held.
func (j *lockstepJob) take() []byte {
	if len(j.waiting) == 0 || len(j.waiting) < j.members {
		return nil
	}
	batch := j.out
	j.out, j.spare = j.spare[:0], nil
	j.waiting = j.waiting[:0]
	return batch
}

// write writes a batch take returned, without mu: no member can queue
// again before its answer, so the next batch cannot be taken before this
// write is done, unless a member leaves meanwhile (a net.Conn's Writes do
// not interleave).
func (j *lockstepJob) write(batch []byte) {
	if batch == nil {
		return
	}
	_, err := j.nc.Write(batch)
	j.mu.Lock()
	if err != nil {
		j.failLocked(err)
	}
	j.spare = batch
	j.mu.Unlock()
}

// failLocked ends the job's connection with err: every goroutine waiting
// for an answer gets ansFailed. Called with mu held.
func (j *lockstepJob) failLocked(err error) {
	if j.err != nil {
		return
	}
	j.err = fmt.Errorf("lockstep: %w", err)
	for _, ch := range j.answers { // a goroutine with an answer in hand takes it first
		select {
		case ch <- ansFailed:
		default:
		}
	}
	j.waiting = j.waiting[:0]
	_ = j.nc.Close()
}

// readLoop reads answers and hands each to the goroutine its opaque names.
func (j *lockstepJob) readLoop() {
	defer close(j.readEnd)
	in := make([]byte, 256<<10)
	r, w := 0, 0
	for {
		for w-r >= memdx.HeaderSize {
			size, err := memdx.PacketSize(in[r:w], 0)
			if err != nil {
				j.fail(err)
				return
			}
			if w-r < size {
				break
			}
			p := in[r : r+size]
			g := int(binary.BigEndian.Uint32(p[12:16])) - 1
			if g < 0 || g >= len(j.answers) {
				j.fail(fmt.Errorf("an answer with opaque %d, which no goroutine sent", g+1))
				return
			}
			st, ans := rawAnswer(p)
			if st != 0 {
				ans = ansStatus
			}
			select {
			case j.answers[g] <- ans:
			default: // the goroutine has an answer it has not taken: a second one, or the failure's
				j.fail(fmt.Errorf("a second answer for opaque %d", g+1))
				return
			}
			r += size
		}
		w = copy(in, in[r:w])
		r = 0
		m, err := j.nc.Read(in[w:])
		if err != nil {
			j.fail(err)
			return
		}
		w += m
	}
}

func (j *lockstepJob) fail(err error) {
	j.mu.Lock()
	j.failLocked(err)
	j.mu.Unlock()
}
