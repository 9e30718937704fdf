// Package dnssrv finds a cluster's nodes by DNS SRV, as SDK RFC 0011 says:
// a connection string with a single host, no port and the couchbase or
// couchbases scheme names the SRV record _couchbase._tcp.HOST (or
// _couchbases._tcp.HOST), whose targets and ports replace the host as the
// seeds. A name with no such record is a host like any other. Couchbase
// Capella publishes its clusters this way.
//
// The resolver is the caller's (a *net.Resolver satisfies Resolver; nil
// means net.DefaultResolver, which follows the machine's resolver
// configuration), so that tests can answer for it.
package dnssrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/internal/connstr"
	"github.com/kvwire/kvwire/internal/dnsctx"
)

// Resolver looks up SRV records. *net.Resolver satisfies it.
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
}

// Record is the name of the SRV record looked up for service ("couchbase"
// or "couchbases") and host: "_couchbase._tcp.host".
func Record(service, host string) string { return "_" + service + "._tcp." + host }

// LookupError is an SRV lookup that gave no seeds: the record does not
// exist (NotFound, the resolver's answer for a name without it, or without
// any records at all), says the service is not available (NotAvailable),
// lists no target, or the lookup failed.
type LookupError struct {
	// Host is the connection string's host; Record the SRV record looked
	// up for it.
	Host, Record string
	// NotFound: the resolver says the record does not exist.
	NotFound bool
	// NotAvailable: the record's only target is "." which, RFC 2782
	// says, means the service is decidedly not available at this domain.
	NotAvailable bool
	// Err is the resolver's error (nil when the record listed no usable
	// target).
	Err error
}

func (e *LookupError) Error() string {
	switch {
	case e.NotAvailable && e.Err == nil:
		return fmt.Sprintf("DNS SRV record %s says the service is not available at this domain (its target is \".\", RFC 2782)", e.Record)
	case e.Err == nil:
		return fmt.Sprintf("DNS SRV record %s lists no target", e.Record)
	case e.NotFound:
		return fmt.Sprintf("no DNS SRV record %s: %v", e.Record, e.Err)
	}
	return fmt.Sprintf("DNS SRV lookup of %s failed: %v", e.Record, e.Err)
}

func (e *LookupError) Unwrap() error { return e.Err }

// Lookup looks up the SRV record of service for host and returns its
// targets as "host:port" (a target's trailing dot removed, IPv6 literals
// in brackets, duplicates dropped, a port of 0 replaced by defaultPort), in
// the order the resolver gave them: RFC 0011 asks clients to ignore
// priority and weight. A lookup that gives no target is a *LookupError and
// no targets. One whose resolver returned some records and an error (as
// *net.Resolver does when it drops records whose target is not a valid
// name) gives those targets and a *LookupError saying why others were
// dropped.
func Lookup(ctx context.Context, r Resolver, service, host string, defaultPort int) ([]string, error) {
	if r == nil {
		r = net.DefaultResolver
	}
	if nr, ok := r.(*net.Resolver); ok {
		r = dnsctx.Interruptible(nr)
	}
	rec := Record(service, host)
	// The record's full name, with service and proto empty: LookupSRV
	// then looks up name as given.
	_, addrs, err := r.LookupSRV(ctx, "", "", rec)
	if err != nil && len(addrs) == 0 {
		var de *net.DNSError
		return nil, &LookupError{Host: host, Record: rec, NotFound: errors.As(err, &de) && de.IsNotFound, Err: err}
	}
	var out []string
	root := false
	for _, a := range addrs {
		if a == nil {
			continue
		}
		target := strings.TrimSuffix(a.Target, ".")
		if target == "" {
			// RFC 2782: a target of "." means the service is
			// decidedly not available at this domain.
			root = root || a.Target == "."
			continue
		}
		port := int(a.Port)
		if port == 0 {
			port = defaultPort
		}
		addr := net.JoinHostPort(target, strconv.Itoa(port))
		if !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	if len(out) == 0 {
		return nil, &LookupError{Host: host, Record: rec, NotAvailable: root, Err: err}
	}
	if err != nil {
		// *net.Resolver drops the records whose target is not a valid
		// name and returns the others with an error: those are the
		// seeds, and the error says what was dropped.
		return out, &LookupError{Host: host, Record: rec, Err: err}
	}
	return out, nil
}

// ForConnStr is the lookup of cs's SRVHost (Seeds, with the scheme's KV
// port for a record's port 0), nil when cs names none. r is the resolver
// (nil: net.DefaultResolver).
func ForConnStr(cs *connstr.ConnStr, r Resolver, logger *slog.Logger) *Seeds {
	if cs.SRVHost == "" {
		return nil
	}
	return &Seeds{Resolver: r, Service: string(cs.Scheme), Host: cs.SRVHost, DefaultPort: cs.Scheme.KVPort(), Logger: logger}
}

// Seeds resolves the seeds of a connection string whose one host may name
// an SRV record. Its Resolve runs once, at the start of a bootstrap; Err
// and Targets are read after it returned (it is not safe for concurrent
// use). Refresh, which changes no field, may run at any time after.
type Seeds struct {
	// Resolver answers the lookup (nil: net.DefaultResolver).
	Resolver Resolver
	// Service is the connection string's scheme, "couchbase" or
	// "couchbases"; Host its one host, written without a port; DefaultPort
	// the scheme's KV port (for a record's port 0).
	Service     string
	Host        string
	DefaultPort int
	Logger      *slog.Logger

	// Err is why the last Resolve kept the seeds it was given (nil when
	// it replaced them with the record's targets): a *LookupError.
	Err error
	// Targets are the record's targets the last Resolve gave.
	Targets []string
}

// Resolve returns the targets of Host's SRV record, or seeds when the
// lookup gives none (the record does not exist, lists no target or only
// ".", or the lookup failed): the name is then a host like any other, and the reason
// is kept in s.Err for the bootstrap's error, should the dials fail too.
// The lookup takes at most half of the time ctx has left, so that the
// dials of the name itself have the rest when the resolver does not
// answer. It never fails: a name that does not resolve fails its dial,
// with both reasons in the bootstrap's error.
func (s *Seeds) Resolve(ctx context.Context, seeds []string) ([]string, error) {
	lctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	targets, err := Lookup(lctx, s.Resolver, s.Service, s.Host, s.DefaultPort)
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(targets) == 0 {
		s.Err, s.Targets = err, nil
		var le *LookupError
		if errors.As(err, &le) && le.NotFound {
			log.Debug("kvwire: no DNS SRV record; using the host as given", "record", le.Record, "host", s.Host)
		} else {
			log.Warn("kvwire: DNS SRV lookup gave no seeds; using the host as given", "host", s.Host, "err", err)
		}
		return seeds, nil
	}
	if err != nil {
		log.Warn("kvwire: DNS SRV record had targets the resolver dropped; using the others", "record", Record(s.Service, s.Host), "targets", targets, "err", err)
	}
	s.Err, s.Targets = nil, targets
	log.Info("kvwire: seeds from DNS SRV", "record", Record(s.Service, s.Host), "targets", targets)
	return targets, nil
}

// RefreshName is the SRV record Refresh looks up: the record whose targets
// the last Resolve gave as the seeds, "" when it kept the seeds it was
// given (no record, or none of its targets: the host as given is the
// cluster's, and nothing is looked up again).
func (s *Seeds) RefreshName() string {
	if len(s.Targets) == 0 {
		return ""
	}
	return Record(s.Service, s.Host)
}

// Refresh looks the record up again (a cluster that moved publishes its
// new nodes there): its targets, as Lookup gives them, and a *LookupError
// when it gave none (no targets then) or dropped some. ctx bounds the
// lookup.
func (s *Seeds) Refresh(ctx context.Context) ([]string, error) {
	return Lookup(ctx, s.Resolver, s.Service, s.Host, s.DefaultPort)
}
