package cluster

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// deferredLogs are records made while one of the cluster's locks is held
// (mu, fetchMu, a node's text pool), logged once it is released (log).
// The Logger's handler is caller code: it may call the cluster's methods
// (an operation of the client, its Diagnostics, Close), which take those
// locks, and run on the goroutine holding one it would wait there
// forever, and every other user of the lock with it. Each record keeps the
// time and the place it was made at; whether the handler takes its level
// is asked only when it is logged (Enabled is caller code too).
type deferredLogs []deferredLog

type deferredLog struct {
	at    time.Time
	pc    uintptr
	level slog.Level
	msg   string
	args  []any
}

// add records a record of level with msg and args (slog's key-value
// pairs), made by add's caller.
func (d *deferredLogs) add(level slog.Level, msg string, args ...any) {
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:]) // add's caller, as slog.Logger.Log records
	*d = append(*d, deferredLog{at: time.Now(), pc: pcs[0], level: level, msg: msg, args: args})
}

// log hands the records, in the order they were made, to l's handler, and
// forgets them. No lock of the cluster is held.
func (d *deferredLogs) log(l *slog.Logger) {
	ctx := context.Background()
	for _, e := range *d {
		h := l.Handler()
		if !h.Enabled(ctx, e.level) {
			continue
		}
		r := slog.NewRecord(e.at, e.level, e.msg, e.pc)
		r.Add(e.args...)
		_ = h.Handle(ctx, r)
	}
	*d = nil
}
