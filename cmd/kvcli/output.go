package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/kvwire/kvwire/client"
)

// jsonResult is the one object --json prints per key-value command.
// Fields that do not apply to the command are left out. CAS values are hex
// strings ("0x..."), because JSON numbers lose precision above 2^53 in
// most decoders.
type jsonResult struct {
	Op  string `json:"op"`
	Key string `json:"key,omitempty"`
	OK  bool   `json:"ok"`
	// Value and Encoding: the value as a UTF-8 string ("utf8") or base64
	// ("base64") when it is not valid UTF-8.
	Value    *string `json:"value,omitempty"`
	Encoding string  `json:"encoding,omitempty"`
	Cas      string  `json:"cas,omitempty"`
	Flags    *uint32 `json:"flags,omitempty"`
	Datatype string  `json:"datatype,omitempty"`
	// Counter is the new value of incr/decr; Exists the answer of exists.
	Counter *uint64 `json:"counter,omitempty"`
	Exists  *bool   `json:"exists,omitempty"`
	// Deleted is true when lookup or mutate found the document deleted (a
	// tombstone); Paths are their per-path results.
	Deleted *bool      `json:"deleted,omitempty"`
	Paths   []jsonPath `json:"paths,omitempty"`
	// LockTime is the lock's duration in seconds (lock).
	LockTime      float64    `json:"lock_time_s,omitempty"`
	MutationToken *jsonToken `json:"mutation_token,omitempty"`
	Route         *jsonRoute `json:"route,omitempty"`
	Ping          []jsonPing `json:"ping,omitempty"`
	// PingReport is ping's report as the SDKs write it: RFC 0061's JSON
	// (RFC 0034's ping report, version 2).
	PingReport json.RawMessage `json:"report,omitempty"`
	// Diagnostics is diag's report: RFC 0061's JSON (version 2).
	Diagnostics json.RawMessage `json:"diagnostics,omitempty"`
	// Results are get's, one per key, when it read several.
	Results      []*jsonResult `json:"results,omitempty"`
	Retries      int           `json:"retries"`
	RetryReasons []string      `json:"retry_reasons,omitempty"`
	Error        *jsonError    `json:"error,omitempty"`
}

type jsonError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Exit    int    `json:"exit"`
	// Status is the last status the server answered, when there was one.
	Status string `json:"status,omitempty"`
	// ServerContext and ServerRef are the server's extended error
	// information (XERROR) of that answer, when it sent any: its words
	// and the id its log files name the failure by.
	ServerContext string `json:"server_context,omitempty"`
	ServerRef     string `json:"server_ref,omitempty"`
	// Ambiguous is true when the request may have been applied although it
	// failed (client.ErrAmbiguous): sent and then interrupted, timed out or
	// cut off before the answer. Whatever the kind, read the key to see.
	Ambiguous bool `json:"ambiguous,omitempty"`
}

type jsonToken struct {
	Bucket  string `json:"bucket"`
	Vbucket uint16 `json:"vbucket"`
	VbUUID  string `json:"vbuuid"`
	Seqno   uint64 `json:"seqno"`
}

type jsonRoute struct {
	Vbucket         *uint16  `json:"vbucket,omitempty"`
	Active          string   `json:"active"`
	Replicas        []string `json:"replicas,omitempty"`
	HasForwardMap   bool     `json:"has_forward_map"`
	ForwardActive   string   `json:"forward_active,omitempty"`
	ForwardReplicas []string `json:"forward_replicas,omitempty"`
	Ketama          bool     `json:"ketama,omitempty"`
	ConfigRev       uint64   `json:"config_rev,omitempty"`
}

type jsonPing struct {
	Node string `json:"node"`
	OK   bool   `json:"ok"`
	// State is RFC 0034's: ok, timeout or error.
	State string `json:"state"`
	// LatencyUS is the node's latency in whole microseconds (RFC 0034's
	// latency_us, as in the report beside it); absent when it failed.
	LatencyUS *uint64 `json:"latency_us,omitempty"`
	// Local and Remote are the sockets of the connection pinged, LocalID
	// its id (RFC 0067's local id).
	Local   string `json:"local,omitempty"`
	Remote  string `json:"remote,omitempty"`
	LocalID string `json:"local_id,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (inv *invocation) printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every type printed here marshals; this would be a kvcli bug.
		fmt.Fprintf(inv.diag(), "kvcli: encoding JSON: %s\n", inv.redact(err.Error()))
		return
	}
	b = append(b, '\n')
	_, _ = inv.env.stdout.Write(b)
}

// setValue fills Value and Encoding.
func (r *jsonResult) setValue(v []byte) {
	var s string
	if utf8.Valid(v) {
		s, r.Encoding = string(v), "utf8"
	} else {
		s, r.Encoding = base64.StdEncoding.EncodeToString(v), "base64"
	}
	r.Value = &s
}

func (r *jsonResult) setRetries(attempts int, reasons client.RetryReasons) {
	r.Retries = attempts
	r.RetryReasons = reasonNames(reasons)
}

func (r *jsonResult) setMutation(m client.MutationResult) {
	r.Cas = fmtCas(m.Cas)
	if m.Token.VbUUID != 0 || m.Token.Seqno != 0 {
		r.MutationToken = &jsonToken{Bucket: m.Token.Bucket, Vbucket: m.Token.Vbucket, VbUUID: fmt.Sprintf("0x%x", m.Token.VbUUID), Seqno: m.Token.Seqno}
	}
	r.setRetries(m.RetryAttempts, m.RetryReasons)
}

func fmtCas(cas uint64) string { return fmt.Sprintf("0x%016x", cas) }

// writeValue prints a value on stdout exactly as stored, adding a newline
// only when stdout is a terminal and the value does not end with one.
func (inv *invocation) writeValue(v []byte) {
	_, _ = inv.env.stdout.Write(v)
	if isTerminal(inv.env.stdout) && (len(v) == 0 || v[len(v)-1] != '\n') {
		_, _ = io.WriteString(inv.env.stdout, "\n")
	}
}

// readValue resolves a VALUE argument: the argument itself, "-" for stdin
// or "@FILE" for a file's contents (raw: always the argument itself). A
// read that blocks (a terminal, a pipe or a FIFO whose writer stays open)
// ends with ctx: its error then wraps ctx's.
func (inv *invocation) readValue(ctx context.Context, arg string, raw bool) ([]byte, error) {
	switch {
	case raw:
		return []byte(arg), nil
	case arg == "-":
		b, err := readCtx(ctx, func() ([]byte, error) { return io.ReadAll(inv.env.stdin) })
		if err != nil {
			return nil, fmt.Errorf("reading the value from stdin: %w", err)
		}
		return b, nil
	case strings.HasPrefix(arg, "@"):
		name := arg[1:]
		if name == "" {
			return nil, fmt.Errorf("value %q: @ needs a file name (use --raw for a literal @)", arg)
		}
		b, err := readCtx(ctx, func() ([]byte, error) { return os.ReadFile(name) })
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("reading the value from %s: %w", name, err)
		}
		if err != nil {
			return nil, fmt.Errorf("value %s: %w (use --raw to store %q literally)", arg, err, arg)
		}
		return b, nil
	}
	return []byte(arg), nil
}

// readCtx runs read on a goroutine of its own and returns what it read, or
// ctx's error when ctx ends first: a blocked read cannot be interrupted,
// and Ctrl-C (which cancels ctx) must still end kvcli. The goroutine is
// left blocked then; kvcli exits.
func readCtx(ctx context.Context, read func() ([]byte, error)) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := read()
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
