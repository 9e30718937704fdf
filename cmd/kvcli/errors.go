package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kvwire/kvwire/client"
)

// Error kinds, as --json reports them in "error.kind".
const (
	kindNotFound    = "not_found"
	kindConflict    = "conflict"
	kindAuth        = "authentication"
	kindBucket      = "bucket"
	kindUnreachable = "unreachable"
	kindTLS         = "tls"
	kindTimeout     = "timeout"
	kindInterrupted = "interrupted"
	kindInvalid     = "invalid_argument"
	kindCollection  = "collection"
	kindAccess      = "access"
	kindUnsupported = "unsupported"
	kindAmbiguous   = "ambiguous"
	kindPath        = "path"
	kindOther       = "error"
)

// problem is an error turned into something a person can act on.
type problem struct {
	kind string
	line string // one line, without "kvcli: "
	code int
}

// explain maps a client error to a kind, an exit code and one line that
// says what to do. key may be empty (connect, ping).
func (inv *invocation) explain(key string, err error) problem {
	user := inv.g.user
	var kv *client.KeyValueError
	isKV := errors.As(err, &kv)
	// Every value put into a line goes through redact (q, msg); the line's
	// own words do not (see redact).
	q := func(s string) string { return fmt.Sprintf("%q", inv.redact(s)) }
	// kvcli's lines start "kvcli: "; the client's errors start "kvwire: ".
	msg := strings.TrimPrefix(inv.redact(err.Error()), "kvwire: ")
	switch {
	case errors.Is(err, client.ErrInvalidConnStr):
		return problem{kindInvalid, inv.connStrLine(err, false), exitUsage}
	case errors.Is(err, client.ErrPlainAuthRefused):
		return problem{kindAuth, "the memcached server requires SASL, and its only mechanism, PLAIN, would send the password of user " +
			q(user) + inv.userSource() + " in clear: connect with memcacheds:// (TLS), or pass --allow-plain-auth to send it in clear", exitError}
	case errors.Is(err, client.ErrAuthenticationFailure):
		if user == "" {
			return problem{kindAuth, "the server requires a user: set -u (or " + envUser + ") and " + envPassword, exitError}
		}
		return problem{kindAuth, "authentication failed for user " + q(user) + inv.userSource() + ": " + inv.checkPassword(), exitError}
	case errors.Is(err, client.ErrBucketNotFound):
		b := inv.bucketName()
		if user == "" {
			return problem{kindBucket, "bucket " + q(b) + " does not exist or needs a user: set -u (or " + envUser + ") and " + envPassword, exitError}
		}
		return problem{kindBucket, "bucket " + q(b) + " does not exist or user " + q(user) + " may not access it", exitError}
	case errors.Is(err, client.ErrTLS):
		return problem{kindTLS, inv.tlsLine(err), exitError}
	case errors.Is(err, client.ErrRequestCanceled), errors.Is(err, context.Canceled):
		// Checked before ErrAmbiguous so that Ctrl-C keeps exit 130, but a
		// write that was on the wire when it came must still say so.
		if errors.Is(err, client.ErrAmbiguous) {
			return problem{kindInterrupted, "interrupted after the request was sent: it may have been applied" + inv.readToSee(key), exitInterrupted}
		}
		return problem{kindInterrupted, "interrupted", exitInterrupted}
	case errors.As(err, new(*client.NotReadyError)): // diag --wait: it names the node out and why
		return problem{kindTimeout, msg, exitError}
	case errors.Is(err, client.ErrTimeout):
		return problem{kindTimeout, inv.timeoutLine(kv, isKV), exitError}
	case errors.Is(err, client.ErrDocumentNotFound):
		return problem{kindNotFound, "document " + q(key) + " not found" + inv.where(), exitNotFound}
	case errors.As(err, new(*client.SubdocError)):
		return inv.explainPath(key, err)
	case errors.Is(err, client.ErrCasMismatch):
		if isKV && kv.Op == "Unlock" {
			return problem{kindConflict, "CAS mismatch on " + q(key) + ": that CAS is not the lock's (the lock may have expired and been taken again)", exitConflict}
		}
		return problem{kindConflict, "CAS mismatch on " + q(key) + ": the document changed since that CAS was read", exitConflict}
	case errors.Is(err, client.ErrDocumentExists):
		return problem{kindConflict, "document " + q(key) + " already exists", exitConflict}
	case errors.Is(err, client.ErrDocumentNotLocked):
		return problem{kindConflict, notLockedLine(q(key), isKV && kv.Status == client.StatusTmpFail), exitConflict}
	case errors.Is(err, client.ErrDocumentLocked):
		return problem{kindConflict, "document " + q(key) + " is locked", exitConflict}
	case errors.Is(err, client.ErrDeltaInvalid):
		return problem{kindInvalid, "document " + q(key) + " is not a number (counters hold a decimal uint64)", exitError}
	case errors.Is(err, client.ErrValueTooLarge):
		return problem{kindInvalid, tooLargeLine(q(key), isKV && kv.Status != client.StatusTooBig), exitError}
	case errors.Is(err, client.ErrScopeNotFound), errors.Is(err, client.ErrCollectionNotFound):
		return problem{kindCollection, "collection " + q(inv.g.collection) + " does not exist in bucket " + q(inv.bucketName()) + " (check --collection)", exitError}
	case errors.Is(err, client.ErrNoAccess):
		return problem{kindAccess, "user " + q(user) + " may not do this in bucket " + q(inv.bucketName()), exitError}
	case errors.Is(err, client.ErrFeatureNotAvailable):
		if !isKV {
			return problem{kindUnsupported, msg, exitError}
		}
		return problem{kindUnsupported, "the server does not support this operation: " + msg, exitError}
	case errors.Is(err, client.ErrInvalidArgument):
		return problem{kindInvalid, msg, exitError}
	case errors.Is(err, client.ErrNoNodeAvailable):
		return problem{kindUnreachable, inv.unreachableLine(err), exitError}
	case errors.Is(err, client.ErrAmbiguous):
		node := "the node"
		if isKV && kv.Node != "" {
			node = inv.redact(kv.Node)
		}
		return problem{kindAmbiguous, "no answer from " + node + " after the request was sent: it may have been applied" + inv.readToSee(key) + ": " + inv.cause(err), exitError}
	}
	return problem{kindOther, msg, exitError}
}

// connStrLine says what is wrong with the connection string, and where
// it came from when that was the environment. whole: err is
// client.ParseConnStr's, about the whole string (its Input may differ from
// it: a password in it is masked); otherwise an Input other than the
// string is one of its options.
func (inv *invocation) connStrLine(err error, whole bool) string {
	var ce *client.ConnStrError
	if !errors.As(err, &ce) {
		return strings.TrimPrefix(inv.redact(err.Error()), "kvwire: ")
	}
	what := "connection string " + strconv.Quote(inv.redact(ce.Input))
	if !whole && ce.Input != inv.g.connStr {
		what = "connection string option " + strconv.Quote(inv.redact(ce.Input))
	}
	from := ""
	if inv.connStrFrom == envConnStr {
		from = " (from " + envConnStr + ")"
	}
	reason := ce.Reason
	// The client's reason names its Go options; a shell user gives the
	// credentials with -u and KVCLI_PASSWORD.
	if r, ok := strings.CutPrefix(reason, "credentials cannot be given in the connection string"); ok && strings.Contains(r, "Options.") {
		reason = "credentials cannot be given in the connection string: use -u (or " + envUser + ") and " + envPassword
	}
	return "invalid " + what + from + ": " + inv.redact(reason)
}

// checkPassword says what to check after a failed login: the password
// where it came from, -p (which wins over KVCLI_PASSWORD) or the variable.
func (inv *invocation) checkPassword() string {
	if inv.passwordFlag {
		return "check the user name and the password given with -p"
	}
	return "check the user name and password (" + envPassword + ")"
}

// userSource says, for a user name that came from the environment, where:
// a KVCLI_USER exported for one server (kvcli serve's mock) is easily
// still set when another is used.
func (inv *invocation) userSource() string {
	if inv.userFrom == envUser {
		return " (from " + envUser + ")"
	}
	return ""
}

// explainPath explains the failure of one sub-document path.
func (inv *invocation) explainPath(key string, err error) problem {
	var se *client.SubdocError
	errors.As(err, &se)
	what := "path " + strconv.Quote(se.Path)
	if se.Xattr {
		what = "extended attribute " + strconv.Quote(se.Path)
	}
	what = inv.redact(what) + " of " + strconv.Quote(inv.redact(key))
	switch {
	case errors.Is(err, client.ErrPathNotFound):
		return problem{kindNotFound, what + " not found", exitNotFound}
	case errors.Is(err, client.ErrPathExists):
		return problem{kindConflict, what + " already exists", exitConflict}
	}
	return problem{kindPath, what + ": " + inv.redact(se.Err.Error()) + " (" + inv.redact(se.Error()) + ")", exitError}
}

// readToSee tells how to find out whether a write to key was applied.
func (inv *invocation) readToSee(key string) string {
	if key == "" {
		return ""
	}
	return fmt.Sprintf(" (read %q to see)", inv.redact(key))
}

// cause is err's root cause (see rootCause), redacted.
func (inv *invocation) cause(err error) string { return inv.redact(rootCause(err)) }

// tlsLine explains a failed TLS handshake. It suggests --cacert only when
// the certificate's authority is unknown, which is what --cacert fixes.
func (inv *invocation) tlsLine(err error) string {
	line := "TLS handshake failed: " + inv.cause(err)
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA):
		if inv.g.cacert == "" {
			return line + " (for a cluster with its own CA pass --cacert FILE or set " + envCACert + ")"
		}
		return line + " (no CA in " + inv.redact(inv.g.cacert) + " signed the server's certificate: is it the cluster's CA?)"
	case errors.As(err, &host):
		return line + " (connect by a host name or address the certificate lists)"
	case errors.As(err, &record), hungUp(err):
		// A plaintext port answered the handshake with garbage or hung up.
		return line + inv.notTLSPort()
	}
	return line
}

// notTLSPort and notTLSPortMemcached are the hints for a couchbases:// or
// memcacheds:// connection whose peer does not speak TLS.
const (
	notTLSPort          = " (is that port a TLS port? couchbases:// uses 11207 by default, couchbase:// is plain TCP)"
	notTLSPortMemcached = " (is that port a TLS port? memcacheds:// needs a memcached started with -Z, memcached:// is plain TCP)"
)

// notTLSPort is the hint for the command line's scheme.
func (inv *invocation) notTLSPort() string {
	if cs, err := client.ParseConnStr(inv.g.connStr); err == nil && cs.Scheme == client.SchemeMemcacheds {
		return notTLSPortMemcached
	}
	return notTLSPort
}

// hungUp reports whether the peer closed or reset the connection.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// tlsScheme reports whether the command line's connection string uses TLS
// (couchbases:// or memcacheds://).
func (inv *invocation) tlsScheme() bool {
	cs, err := client.ParseConnStr(inv.g.connStr)
	return err == nil && cs.Scheme.IsTLS()
}

// bucketName is the bucket the command line names.
func (inv *invocation) bucketName() string {
	if inv.g.bucket != "" {
		return inv.g.bucket
	}
	if cs, err := client.ParseConnStr(inv.g.connStr); err == nil && cs.Bucket != "" {
		return cs.Bucket
	}
	return "default"
}

// where names the keyspace when it is not the default one.
func (inv *invocation) where() string {
	s, c, err := parseCollection(inv.g.collection)
	if err != nil || (s == client.DefaultScope && c == client.DefaultCollection) {
		return ""
	}
	return " in " + inv.redact(s+"."+c)
}

// unreachableLine explains a connect failure that reached no server, and,
// when the connection string's host was looked up as a DNS SRV name that
// gave no seeds, the record looked up and why.
func (inv *invocation) unreachableLine(err error) string {
	var ce *client.ConnectError
	if !errors.As(err, &ce) || ce.SRV == nil {
		return inv.unreachableReason(err)
	}
	dialed := *ce
	dialed.SRV = nil // the reason is the dials'; the lookup is said after it
	return inv.unreachableReason(&dialed) + "; dialed as written: " + inv.redact(ce.SRV.Error())
}

// unreachableReason is unreachableLine's first part.
func (inv *invocation) unreachableReason(err error) string {
	var ce *client.ConnectError
	var kv *client.KeyValueError
	hosts := ""
	switch {
	case errors.As(err, &ce):
		hosts = inv.redact(strings.Join(ce.Hosts, ", "))
	case errors.As(err, &kv) && kv.Node != "":
		// A key whose server is down (memcached:// fails those at once).
		hosts = inv.redact(kv.Node)
	}
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		if hosts == "" {
			return "nothing is listening at the cluster's address (is the cluster running? check -c)"
		}
		return "nothing is listening at " + hosts + " (is the cluster running? check -c)"
	case errors.As(err, &dns):
		return "cannot resolve host " + fmt.Sprintf("%q", inv.redact(dns.Name)) + " (check -c)"
	case errors.Is(err, context.DeadlineExceeded), isNetTimeout(err):
		d, from := inv.connectTimeout, inv.connectTimeoutFrom
		if d == 0 { // not set by connect
			d, from = inv.g.connectTimeout, "--connect-timeout"
		}
		return fmt.Sprintf("no answer from %s within %v (%s): firewall, wrong port, or a server that is not Couchbase/memcached?",
			orAll(hosts), d, from)
	}
	hint := ""
	if inv.tlsScheme() && hungUp(err) {
		// A plaintext port hangs up on a TLS ClientHello; conn reports
		// that as a network failure, not a TLS one.
		hint = inv.notTLSPort()
	}
	if hosts != "" {
		return "cannot reach " + hosts + ": " + inv.cause(err) + hint
	}
	return "no node could serve the request: " + inv.cause(err) + hint
}

func orAll(hosts string) string {
	if hosts == "" {
		return "the cluster"
	}
	return hosts
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rootCause is the innermost message of err's first chain, which is what a
// person reads ("connection reset by peer", "x509: ...").
func rootCause(err error) string {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err.Error()
			}
			err = next
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return err.Error()
			}
			err = errs[len(errs)-1]
		default:
			return err.Error()
		}
	}
}

// reasonWhy says in words what a retry reason means when it is what an
// operation kept retrying for until it timed out.
var reasonWhy = map[client.RetryReason]string{
	client.RetryReasonKVLocked:                      "the document stayed locked",
	client.RetryReasonKVTemporaryFailure:            "the server kept answering TMPFAIL (busy, warming up or out of memory)",
	client.RetryReasonKVNotMyVbucket:                "the cluster map kept changing (a rebalance or failover?)",
	client.RetryReasonKVCollectionOutdated:          "the collection manifest kept changing",
	client.RetryReasonKVErrorMapRetryIndicated:      "the server kept answering a status its error map says to retry",
	client.RetryReasonKVSyncWriteInProgress:         "a durable write to the document stayed pending",
	client.RetryReasonKVSyncWriteReCommitInProgress: "a durable write to the document was being re-committed",
	client.RetryReasonSocketNotAvailable:            "no connection to the node was up",
	client.RetryReasonNodeNotAvailable:              "the node was not available",
	client.RetryReasonServiceNotAvailable:           "the KV service was not available on the node",
	client.RetryReasonSocketClosedWhileInFlight:     "connections closed with the request in flight",
	client.RetryReasonCircuitBreakerOpen:            "the node's circuit breaker was open",
}

// lastAnswerRetried reports whether kv's last status is among the
// reasons its retries were made for: the reason the client gave that
// status (StatusReason, its status policy's) is one of them.
func lastAnswerRetried(kv *client.KeyValueError) bool {
	return kv.StatusReason != client.RetryReasonUnknown && kv.RetryReasons.Has(kv.StatusReason)
}

// timeoutLine explains a timeout: how long, how often it was retried and
// why, and whether a write may have been applied.
func (inv *invocation) timeoutLine(kv *client.KeyValueError, isKV bool) string {
	line := fmt.Sprintf("timed out after %v", inv.opTimeout)
	if !isKV {
		return line
	}
	status := kv.ErrorName
	if status == "" && kv.Status != 0 {
		status = kv.Status.String()
	}
	if kv.RetryAttempts == 0 || kv.RetryReasons.Len() == 0 {
		switch {
		case kv.Node != "" && kv.Status != 0:
			// It answered (its retry's wait ran into the deadline).
			line += "; " + inv.redact(kv.Node) + " answered " + status
		case kv.Node != "":
			line += " waiting for " + inv.redact(kv.Node) + " to answer (vbucket " + fmt.Sprint(kv.Vbucket) + ")"
		}
	} else {
		var names, whys []string
		for r := range kv.RetryReasons.All() {
			names = append(names, r.String())
			if r == client.RetryReasonKVErrorMapRetryIndicated && kv.StatusReason == r && status != "" {
				// The status the map said to retry is the last answer's:
				// name it.
				whys = append(whys, "the server kept answering "+status+", a status its error map says to retry")
			} else if w, ok := reasonWhy[r]; ok {
				whys = append(whys, w)
			}
		}
		times := "times"
		if kv.RetryAttempts == 1 {
			times = "time"
		}
		line += fmt.Sprintf("; retried %d %s for %s", kv.RetryAttempts, times, strings.Join(names, ", "))
		if len(whys) > 0 {
			line += ": " + strings.Join(whys, "; ")
		}
		if kv.Node != "" && kv.Status != 0 && !lastAnswerRetried(kv) {
			// The last answer's retry was not made (its wait ran into
			// the deadline), so its reason is not among the retries'.
			line += "; " + inv.redact(kv.Node) + " answered " + status + " last"
		}
	}
	line += inv.serverSaid(kv)
	if kv.Ambiguous {
		line += "; it may have been applied"
	}
	return line
}

// serverSaid is what a timeout's line adds of the server's extended error
// information (XERROR) of the last answer: its context, in its words, and
// its ref, the id kv_engine's log names the failure by (an EACCESS for a
// missing privilege carries both: daemon/cookie.cc, Cookie::checkPrivilege;
// either may come alone). "" when the answer had neither.
func (inv *invocation) serverSaid(kv *client.KeyValueError) string {
	var s string
	if kv.ServerContext != "" {
		s = "; the server said " + strconv.Quote(inv.redact(kv.ServerContext))
	}
	if kv.ServerErrorRef != "" {
		if s == "" {
			s = "; the server's error"
		}
		s += " (ref " + inv.redact(kv.ServerErrorRef) + ")"
	}
	return s
}

// fail reports err for op on key: one line on stderr and, with --json,
// an object on stdout, except for a usage error (a connection string
// option only connecting reads), which prints nothing on stdout as every
// other usage error. It returns the exit code.
func (inv *invocation) fail(key, op string, err error) int {
	code, res := inv.failure(key, op, err)
	if inv.g.json && code != exitUsage {
		inv.printJSON(res)
	}
	return code
}

// failure reports err for op on key on stderr, and returns the exit code
// and the failure as --json shows it, for the caller to print (alone, or
// as part of one document).
func (inv *invocation) failure(key, op string, err error) (int, *jsonResult) {
	return inv.failureOf(key, op, err, false)
}

// failureOf is failure; nameKey (a command of several keys) puts the key
// before a line that does not name it, so that each line says which key
// failed.
func (inv *invocation) failureOf(key, op string, err error, nameKey bool) (int, *jsonResult) {
	p := inv.explain(key, err)
	if q := strconv.Quote(inv.redact(key)); nameKey && !strings.Contains(p.line, q) {
		fmt.Fprintf(inv.diag(), "kvcli: %s: %s\n", q, p.line)
	} else {
		fmt.Fprintf(inv.diag(), "kvcli: %s\n", p.line)
	}
	if detail := inv.redact(err.Error()); inv.g.verbose && p.line != detail {
		fmt.Fprintf(inv.diag(), "kvcli: detail: %s\n", detail)
	}
	res := &jsonResult{Op: op, Key: key, Error: &jsonError{Kind: p.kind, Message: inv.redactLine(p.line), Exit: p.code,
		Ambiguous: errors.Is(err, client.ErrAmbiguous)}}
	var kv *client.KeyValueError
	if errors.As(err, &kv) {
		res.Retries = kv.RetryAttempts
		res.RetryReasons = reasonNames(kv.RetryReasons)
		if kv.Status != 0 {
			res.Error.Status = kv.Status.String()
		}
		res.Error.ServerContext = inv.redact(kv.ServerContext)
		res.Error.ServerRef = inv.redact(kv.ServerErrorRef)
	}
	return p.code, res
}

func reasonNames(s client.RetryReasons) []string {
	var out []string
	for r := range s.All() {
		out = append(out, r.String())
	}
	return out
}

// The password is kept out of every diagnostic in two layers.
//
// First, at the source: a value formatted into a line (an error's text, a
// server's or the client's words, a key, a host, a log attribute) passes
// through redact, which masks every occurrence of the password in it. The
// line's own words, written in kvcli's source, are not masked: with the
// mock's password "password", "check the user name and password" stays
// readable.
//
// Second, at the sink: everything written to stderr (diag) and the JSON
// error message pass through redactLine, a backstop for a value that
// missed redact. It masks every occurrence too, except one that is a whole
// word when the password is a plain word (letters only), since that cannot
// be told from kvcli's own text ("password", "user"); values holding such
// a word were masked by redact already. "Whole word" means prose: the
// occurrence follows the start, a space, ( or a quote and is followed by
// the end, a space or punctuation that ends a word (so "user:password@h"
// is still masked).
//
// Passwords shorter than minRedactLen are not masked: masking one or two
// characters everywhere would leave nothing readable.
const minRedactLen = 3

// redact masks every occurrence of the password in s, a value that goes
// into a diagnostic. Values printed on stdout as results are never redacted.
func (inv *invocation) redact(s string) string {
	if p := inv.g.password; len(p) >= minRedactLen && strings.Contains(s, p) {
		return strings.ReplaceAll(s, p, "****")
	}
	return s
}

// redactArgs redacts the string, error and Stringer values among a format's
// arguments; the format is kvcli's own text.
func (inv *invocation) redactArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = inv.redact(v)
		case error:
			out[i] = inv.redact(v.Error())
		case fmt.Stringer:
			out[i] = inv.redact(v.String())
		default:
			out[i] = a
		}
	}
	return out
}

// redactLine is the sink's backstop (see redact): every occurrence of the
// password in a finished line is masked, except a whole-word occurrence of
// a password made of letters only.
func (inv *invocation) redactLine(s string) string {
	p := inv.g.password
	if len(p) < minRedactLen || !strings.Contains(s, p) {
		return s
	}
	word := strings.IndexFunc(p, func(r rune) bool { return !unicode.IsLetter(r) }) < 0
	var b strings.Builder
	for {
		i := strings.Index(s, p)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(p)
		b.WriteString(s[:i])
		if word && proseBefore(s, i) && proseAfter(s, end) {
			b.WriteString(p)
		} else {
			b.WriteString("****")
		}
		s = s[end:]
	}
}

// proseBefore reports whether s[:i] ends where a word of prose may start.
func proseBefore(s string, i int) bool {
	r, n := utf8.DecodeLastRuneInString(s[:i])
	return n == 0 || unicode.IsSpace(r) || strings.ContainsRune("(\"'", r)
}

// proseAfter reports whether s[i:] starts where a word of prose may end.
func proseAfter(s string, i int) bool {
	r, n := utf8.DecodeRuneInString(s[i:])
	return n == 0 || unicode.IsSpace(r) || strings.ContainsRune(")\"'.,:;", r)
}

// diag is stderr behind the backstop, one write at a time.
func (inv *invocation) diag() io.Writer { return redactWriter{inv} }

type redactWriter struct{ inv *invocation }

func (w redactWriter) Write(p []byte) (int, error) {
	s := w.inv.redactLine(string(p))
	// slog (config goroutine), the tracer (operation goroutines) and the
	// command share stderr: one write at a time.
	w.inv.errMu.Lock()
	defer w.inv.errMu.Unlock()
	if _, err := io.WriteString(w.inv.env.stderr, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// fmtDuration rounds a duration for people.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// tooLargeLine is the line of ErrValueTooLarge; quoted is the document's
// key, quoted and redacted. read: no E2BIG came, so the server sent an
// answer longer than the client reads (a memcached started with -I over
// 20m stores such values), rather than refusing the value.
func tooLargeLine(quoted string, read bool) string {
	if read {
		return "the value of " + quoted + " is larger than kvwire reads (20 MiB):" +
			" the server holds it (memcached -I over 20m allows that) but kvwire cannot read it (-v shows the detail)"
	}
	return "the value is larger than the server accepts (20 MiB on Couchbase, 1 MiB on memcached by default)"
}

// notLockedLine is what unlock prints for ErrDocumentNotLocked; quoted is
// the document's key, quoted and redacted. tmpfail: the server answered
// TMPFAIL, which Couchbase Server before 7.6 answers for a document that
// is not locked, and which a connection without XERROR (couchbase:// drops
// XERROR when a node's error map is unusable) also gets for a lock held
// with another CAS.
func notLockedLine(quoted string, tmpfail bool) string {
	if tmpfail {
		return "document " + quoted + " is not locked, or (on a connection without XERROR) locked with another CAS: the server answered TMPFAIL, which stands for both"
	}
	return "document " + quoted + " is not locked"
}
