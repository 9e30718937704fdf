package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/kvwire/kvwire/client"
)

// target is a resolved connection string and keyspace.
type target struct {
	cs         *client.ConnStr
	connStr    string // cs rebuilt, with the bucket applied
	scope      string
	collection string
}

// resolveTarget applies -b and --collection to the connection string. Its
// errors are usage errors.
func (inv *invocation) resolveTarget() (*target, error) {
	cs, err := client.ParseConnStr(inv.g.connStr)
	if err != nil {
		return nil, errors.New(inv.connStrLine(err, true))
	}
	if inv.g.bucket != "" {
		cs.Bucket = inv.g.bucket
	}
	if cs.Scheme.IsMemcached() {
		if inv.g.bucket != "" {
			return nil, fmt.Errorf("%s:// has no buckets: drop -b %q", cs.Scheme, inv.g.bucket)
		}
	} else if cs.Bucket == "" {
		cs.Bucket = "default"
	}
	t := &target{cs: cs, connStr: cs.String()}
	t.scope, t.collection, err = parseCollection(inv.g.collection)
	if err != nil {
		return nil, err
	}
	if cs.Scheme.IsMemcached() && (t.scope != client.DefaultScope || t.collection != client.DefaultCollection) {
		return nil, fmt.Errorf("%s:// has no collections: drop --collection %q", cs.Scheme, inv.g.collection)
	}
	return t, nil
}

// parseCollection reads "scope.collection", or "collection" of the default
// scope.
func parseCollection(s string) (scope, coll string, err error) {
	if s == "" {
		return client.DefaultScope, client.DefaultCollection, nil
	}
	scope, coll, found := strings.Cut(s, ".")
	if !found {
		scope, coll = client.DefaultScope, s
	}
	if scope == "" || coll == "" || strings.Contains(coll, ".") {
		return "", "", fmt.Errorf("--collection %q: want scope.collection (or a collection of %s)", s, client.DefaultScope)
	}
	return scope, coll, nil
}

// clientOptions builds the client's options from the globals.
func (inv *invocation) clientOptions(obs client.Observer) (*client.Options, error) {
	o := &client.Options{
		Username:       inv.g.user,
		Password:       inv.g.password,
		KVTimeout:      inv.opTimeout,      // set by resolveTimeouts
		ConnectTimeout: inv.connectTimeout, // connect_timeout, when kept in the connection string, wins
		ClientName:     "kvcli",
		Observer:       obs,
		// memcached:// only (connect refuses it elsewhere): PLAIN in
		// clear, asked for by name.
		AllowPlainAuthWithoutTLS: inv.g.allowPlainAuth,
	}
	if inv.g.verbose {
		o.Logger = slog.New(slog.NewTextHandler(inv.diag(), &slog.HandlerOptions{
			Level: slog.LevelDebug,
			// Attribute values (errors, hosts, keys) are the client's
			// values: redacted. The messages are its constant text.
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if k := a.Value.Kind(); k == slog.KindString || k == slog.KindAny {
					s := a.Value.String()
					// A report is JSON as a TextMarshaler: its
					// text, as the text handler would print it,
					// not fmt's decimal bytes.
					if m, ok := a.Value.Any().(encoding.TextMarshaler); ok && k == slog.KindAny {
						if b, err := m.MarshalText(); err == nil {
							s = string(b)
						}
					}
					return slog.String(a.Key, inv.redact(s))
				}
				return a
			},
		}))
	}
	if inv.reports != nil {
		var next slog.Handler
		if o.Logger != nil {
			next = o.Logger.Handler()
		}
		o.Logger = slog.New(inv.reports.handler(next))
	}
	if inv.g.cacert != "" { // couchbases:// and memcacheds:// only (see connect)
		pem, err := os.ReadFile(inv.g.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", inv.g.cacert)
		}
		o.TLSConfig = &tls.Config{RootCAs: pool}
	}
	return o, nil
}

// resolveTimeouts decides the timeout of each operation and of
// connecting, which kvcli gives the client explicitly: -t wins over the
// connection string's kv_timeout, which wins over its profile's
// (profile=wan_development), which wins over the default.
// -t drops kv_timeout from the connection string: the client would let
// it win over Options.KVTimeout, which bounds ping. --connect-timeout
// likewise wins over connect_timeout (which the client would let win over
// Options.ConnectTimeout: it is dropped from the connection string), and
// the error that reports a connect timeout names the one used and where
// it came from. An invalid kv_timeout,
// connect_timeout or profile is left for the client to reject.
func (inv *invocation) resolveTimeouts(t *target) {
	var profile client.Options
	if p, ok := t.cs.Options["profile"]; ok {
		profile, _ = client.ConfigProfile(p).Defaults()
	}
	inv.opTimeout = inv.g.timeout
	d, ok, err := t.cs.Duration("kv_timeout")
	switch {
	case err == nil && ok && d > 0 && inv.timeoutFlag:
		delete(t.cs.Options, "kv_timeout")
		t.connStr = t.cs.String()
	case err == nil && ok && d > 0:
		inv.opTimeout = d
	case !inv.timeoutFlag && profile.KVTimeout > 0:
		inv.opTimeout = profile.KVTimeout
	}
	inv.connectTimeout, inv.connectTimeoutFrom = inv.g.connectTimeout, "the default --connect-timeout"
	if inv.connectTimeoutFlag {
		inv.connectTimeoutFrom = "--connect-timeout"
	} else if profile.ConnectTimeout > 0 {
		inv.connectTimeout, inv.connectTimeoutFrom = profile.ConnectTimeout, "the connection string's profile"
	}
	if d, ok, err := t.cs.Duration("connect_timeout"); err == nil && ok && d > 0 {
		if inv.connectTimeoutFlag {
			delete(t.cs.Options, "connect_timeout")
			t.connStr = t.cs.String()
		} else {
			inv.connectTimeout, inv.connectTimeoutFrom = d, "connect_timeout in the connection string"
		}
	}
}

// session is a connected client with the keyspace the command works on.
type session struct {
	c   *client.Client
	col *client.Collection
	t   *target
}

func (s *session) Close() { _ = s.c.Close() }

// connect resolves the target and connects. On failure it has reported
// the error and returns the exit code.
func (inv *invocation) connect(ctx context.Context, obs client.Observer) (*session, int) {
	if inv.passwordFlag {
		inv.warnf("-p shows the password in the process list; set %s instead", envPassword)
	}
	t, err := inv.resolveTarget()
	if err != nil {
		inv.usageError("%v", err)
		return nil, exitUsage
	}
	// --allow-plain-auth is plain memcached's opt-in: Couchbase nodes
	// offer SCRAM, and allowing PLAIN there would let a server (or anyone
	// on the path who strips SCRAM from the mechanism list) have the
	// password in clear; memcacheds:// does not need it.
	if inv.g.allowPlainAuth && t.cs.Scheme != client.SchemeMemcached {
		inv.usageError("--allow-plain-auth is for memcached:// only (%s:// does not need it, and kvcli never sends a Couchbase password in clear)", t.cs.Scheme)
		return nil, exitUsage
	}
	// Only couchbases:// and memcacheds:// are TLS. KVCLI_CACERT (which
	// serve --tls exports) must not turn TLS on for a couchbase:// or
	// memcached:// command run later in the same shell; an explicit
	// --cacert there is a mistake.
	if !t.cs.Scheme.IsTLS() && inv.g.cacert != "" {
		if inv.cacertFlag {
			use := client.SchemeCouchbases
			if t.cs.Scheme.IsMemcached() {
				use = client.SchemeMemcacheds
			}
			inv.usageError("--cacert is for TLS, and only couchbases:// and memcacheds:// use TLS: connect with %s://... (or drop --cacert)", use)
			return nil, exitUsage
		}
		inv.g.cacert = ""
	}
	if inv.g.timeout <= 0 || inv.g.connectTimeout <= 0 {
		inv.usageError("--timeout and --connect-timeout must be positive")
		return nil, exitUsage
	}
	inv.resolveTimeouts(t)
	opts, err := inv.clientOptions(obs)
	if err != nil {
		inv.usageError("%s", err)
		return nil, exitUsage
	}
	if obs == nil && inv.g.verbose {
		opts.Observer = newTracer(inv.diag(), inv.redact)
	}
	if t.cs.Scheme.IsTLS() && opts.TLSConfig == nil {
		// Verification stays on: the system roots apply.
		opts.TLSConfig = &tls.Config{}
	}
	c, err := client.Connect(ctx, t.connStr, opts)
	if err != nil {
		return nil, inv.fail("", "connect", err)
	}
	col := c.DefaultCollection()
	if t.scope != client.DefaultScope || t.collection != client.DefaultCollection {
		col = c.Scope(t.scope).Collection(t.collection)
	}
	return &session{c: c, col: col, t: t}, exitOK
}
