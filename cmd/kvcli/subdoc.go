package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/client"
)

// jsonPath is one path's result in lookup's and mutate's --json output.
type jsonPath struct {
	Path  string `json:"path"`
	Xattr bool   `json:"xattr,omitempty"`
	// Value is the path's JSON value as the server returned it; a value
	// that is not JSON (the whole body of a binary document) is in Raw,
	// as a UTF-8 string or base64 (Encoding), as get's value is.
	Value    json.RawMessage `json:"value,omitempty"`
	Raw      *string         `json:"raw,omitempty"`
	Encoding string          `json:"encoding,omitempty"`
	// Exists is lookup --exists's answer.
	Exists *bool      `json:"exists,omitempty"`
	Error  *jsonError `json:"error,omitempty"`
}

// setValue fills Value, or Raw and Encoding for a value that is not JSON.
func (p *jsonPath) setValue(v []byte) {
	if json.Valid(v) {
		p.Value = json.RawMessage(v)
		return
	}
	var r jsonResult
	r.setValue(v)
	p.Raw, p.Encoding = r.Value, r.Encoding
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// lookupPath is one path lookup reads.
type lookupPath struct {
	path  string
	xattr bool
}

func cmdLookup(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("lookup")
	var xattrs stringList
	fs.Var(&xattrs, "xattr", "an extended attribute `PATH` to read (repeatable; read before the body paths)")
	exists := fs.Bool("exists", false, "check that each path exists instead of reading it (exit 3 when one does not)")
	count := fs.Bool("count", false, "count each path's array elements or object keys")
	deleted := fs.Bool("access-deleted", false, "read a deleted document's extended attributes (a tombstone)")
	return inv.withSession(ctx, fs, args, 1, -1, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		if *exists && *count {
			return nil, errors.New("--exists and --count exclude each other")
		}
		var paths []lookupPath
		for _, x := range xattrs {
			paths = append(paths, lookupPath{x, true})
		}
		for _, p := range pos[1:] {
			paths = append(paths, lookupPath{p, false})
		}
		if len(paths) == 0 {
			return nil, errors.New("no PATH: name at least one path (\"\" is the whole document) or --xattr")
		}
		if len(paths) > client.MaxSubdocSpecs {
			return nil, fmt.Errorf("%d paths; at most %d per lookup", len(paths), client.MaxSubdocSpecs)
		}
		specs := make([]client.LookupInSpec, len(paths))
		for i, p := range paths {
			switch {
			case *exists:
				specs[i] = client.ExistsSpec(p.path, &client.ExistsSpecOptions{IsXattr: p.xattr})
			case *count:
				specs[i] = client.CountSpec(p.path, &client.CountSpecOptions{IsXattr: p.xattr})
			default:
				specs[i] = client.GetSpec(p.path, &client.GetSpecOptions{IsXattr: p.xattr})
			}
		}
		return func(s *session) int {
			r, err := s.col.LookupIn(ctx, key, specs, &client.LookupInOptions{Timeout: inv.opTimeout, AccessDeleted: *deleted})
			if err != nil {
				return inv.fail(key, "lookup", err)
			}
			return inv.lookedUp(key, paths, *exists, r)
		}, nil
	})
}

// lookedUp prints lookup's results and returns the exit status: 0 when
// every path succeeded, 3 when a path was missing and none failed
// otherwise, 1 when one failed otherwise. --json's "ok" is false, and
// "error" is the failure of the path that gave the exit status, when
// that status is not 0; but a path --exists finds missing is an answer
// (false, exit 3, as exists answers for a document), not a failure.
func (inv *invocation) lookedUp(key string, paths []lookupPath, exists bool, r client.LookupInResult) int {
	code := exitOK
	var failed *jsonError // the path failure that gave code
	res := &jsonResult{Op: "lookup", Key: key, OK: true, Cas: fmtCas(r.Cas)}
	if r.IsDeleted {
		res.Deleted = &r.IsDeleted
	}
	res.setRetries(r.RetryAttempts, r.RetryReasons)
	w := inv.env.stdout
	for i, p := range paths {
		jp := jsonPath{Path: p.path, Xattr: p.xattr}
		v, err := r.ValueAt(i)
		label := inv.pathLabel(p.path, p.xattr)
		switch {
		case exists:
			ok := err == nil
			jp.Exists = &ok
			if err != nil && !errors.Is(err, client.ErrPathNotFound) {
				jp.Error = inv.pathError(key, err)
			}
			if !inv.g.json {
				fmt.Fprintf(w, "%s\t%t\n", label, ok)
			}
		case err == nil:
			jp.setValue(v)
			if !inv.g.json {
				fmt.Fprintf(w, "%s\t%s\n", label, v)
			}
		default:
			jp.Error = inv.pathError(key, err)
			if !inv.g.json {
				fmt.Fprintf(w, "%s\terror: %s\n", label, jp.Error.Message)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, client.ErrPathNotFound):
			if code == exitOK {
				code = exitNotFound
				failed = jp.Error
			}
		default:
			if code != exitError {
				failed = jp.Error
			}
			code = exitError
		}
		res.Paths = append(res.Paths, jp)
	}
	if failed != nil {
		e := *failed
		e.Exit = code // a path's own code may be another (4: conflict)
		res.OK, res.Error = false, &e
	}
	if inv.g.json {
		inv.printJSON(res)
	} else if r.IsDeleted {
		fmt.Fprintf(inv.diag(), "%s is deleted (a tombstone)\n", strconv.Quote(inv.redact(key)))
	}
	return code
}

// pathLabel is how a path is shown on its output line.
func (inv *invocation) pathLabel(path string, xattr bool) string {
	label := strconv.Quote(path)
	if path != "" && !strings.ContainsAny(path, " \t\n\"\\") {
		label = path
	}
	if xattr {
		return "xattr " + label
	}
	return label
}

// pathError is a path's error as --json shows it.
func (inv *invocation) pathError(key string, err error) *jsonError {
	p := inv.explain(key, err)
	return &jsonError{Kind: p.kind, Message: inv.redactLine(p.line), Exit: p.code}
}

// mutateOps are the operations mutate takes, with whether each takes a
// value. An operation with the suffix -xattr works on an extended
// attribute.
var mutateOps = map[string]bool{
	"insert": true, "upsert": true, "replace": true, "remove": false,
	"append": true, "prepend": true, "array-insert": true, "add-unique": true,
	"incr": true, "decr": true,
}

// mutateSpec is one change of mutate, as parsed.
type mutateSpec struct {
	op    string
	path  string
	value string
	xattr bool
}

// parseMutateSpecs reads OP PATH [VALUE] groups.
func parseMutateSpecs(args []string, allXattr bool) ([]mutateSpec, error) {
	var out []mutateSpec
	for len(args) > 0 {
		word := args[0]
		op, xattr := strings.CutSuffix(word, "-xattr")
		takesValue, ok := mutateOps[op]
		if !ok {
			return nil, fmt.Errorf("unknown operation %q: want insert, upsert, replace, remove, append, prepend, "+
				"array-insert, add-unique, incr or decr (with -xattr for an extended attribute)", word)
		}
		n := 2
		if takesValue {
			n = 3
		}
		if len(args) < n {
			want := "PATH"
			if takesValue {
				want = "PATH and VALUE"
			}
			return nil, fmt.Errorf("%s needs %s", word, want)
		}
		s := mutateSpec{op: op, path: args[1], xattr: xattr || allXattr}
		if takesValue {
			s.value = args[2]
		}
		out = append(out, s)
		args = args[n:]
	}
	if len(out) == 0 {
		return nil, errors.New("no operation: give OP PATH [VALUE], e.g. upsert name '\"Ada\"'")
	}
	if len(out) > client.MaxSubdocSpecs {
		return nil, fmt.Errorf("%d operations; at most %d per mutate", len(out), client.MaxSubdocSpecs)
	}
	body := -1
	for i, s := range out {
		switch {
		case !s.xattr && body < 0:
			body = i
		case s.xattr && body >= 0:
			return nil, fmt.Errorf("operation %d (%s-xattr %s) follows a body operation: extended attributes come first", i+1, s.op, s.path)
		}
	}
	return out, nil
}

// isMacro reports whether v is one of the mutation macros, with or without
// its quotes.
func isMacro(v string) (client.MutationMacro, bool) {
	for _, m := range []client.MutationMacro{client.MutationMacroCAS, client.MutationMacroSeqNo, client.MutationMacroValueCRC32c} {
		if v == string(m) || `"`+v+`"` == string(m) {
			return m, true
		}
	}
	return "", false
}

// clientSpec builds the client's spec.
func (s *mutateSpec) clientSpec(createPath bool) (client.MutateInSpec, error) {
	x := s.xattr
	value := []byte(s.value)
	macros := false
	if m, ok := isMacro(s.value); ok && x {
		value, macros = m.Bytes(), true
	}
	switch s.op {
	case "insert":
		return client.InsertSpec(s.path, value, &client.InsertSpecOptions{CreatePath: createPath, IsXattr: x, ExpandMacros: macros}), nil
	case "upsert":
		return client.UpsertSpec(s.path, value, &client.UpsertSpecOptions{CreatePath: createPath, IsXattr: x, ExpandMacros: macros}), nil
	case "replace":
		return client.ReplaceSpec(s.path, value, &client.ReplaceSpecOptions{IsXattr: x, ExpandMacros: macros}), nil
	case "remove":
		return client.RemoveSpec(s.path, &client.RemoveSpecOptions{IsXattr: x}), nil
	case "append":
		return client.ArrayAppendSpec(s.path, value, &client.ArrayAppendSpecOptions{CreatePath: createPath, IsXattr: x, ExpandMacros: macros}), nil
	case "prepend":
		return client.ArrayPrependSpec(s.path, value, &client.ArrayPrependSpecOptions{CreatePath: createPath, IsXattr: x, ExpandMacros: macros}), nil
	case "array-insert":
		return client.ArrayInsertSpec(s.path, value, &client.ArrayInsertSpecOptions{IsXattr: x, ExpandMacros: macros}), nil
	case "add-unique":
		return client.ArrayAddUniqueSpec(s.path, value, &client.ArrayAddUniqueSpecOptions{CreatePath: createPath, IsXattr: x}), nil
	}
	d, err := strconv.ParseInt(s.value, 10, 64)
	if err != nil {
		return client.MutateInSpec{}, fmt.Errorf("%s %s %q: want a decimal int64 delta", s.op, s.path, s.value)
	}
	o := &client.CounterSpecOptions{CreatePath: createPath, IsXattr: x}
	if s.op == "incr" {
		return client.IncrementSpec(s.path, d, o), nil
	}
	return client.DecrementSpec(s.path, d, o), nil
}

// mutateFlags are mutate's own flags.
type mutateFlags struct {
	allXattr, upsertDoc, insertDoc, createPath *bool
	cas                                        casFlag
	expiry                                     *time.Duration
	preserve, deleted, asDeleted, revive       *bool
}

func cmdMutate(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("mutate")
	f := &mutateFlags{}
	f.allXattr = fs.Bool("xattr", false, "every operation works on an extended attribute")
	f.upsertDoc = fs.Bool("upsert-doc", false, "create the document when missing")
	f.insertDoc = fs.Bool("insert-doc", false, "create the document; exit 4 if it exists")
	f.createPath = fs.Bool("create-path", false, "create missing parent objects of each path")
	fs.Var(&f.cas, "cas", "change the document only if its CAS is still this (hex or decimal)")
	f.expiry = fs.Duration("expiry", 0, "the document's time to live (0: none)")
	f.preserve = fs.Bool("preserve-expiry", false, "keep the document's expiry")
	f.deleted = fs.Bool("access-deleted", false, "change a deleted document (a tombstone), which stays deleted")
	f.asDeleted = fs.Bool("create-as-deleted", false, "create the document as a tombstone (with --upsert-doc or --insert-doc)")
	f.revive = fs.Bool("revive", false, "make a deleted document live again")
	return inv.withSession(ctx, fs, args, 1, -1, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		parsed, err := parseMutateSpecs(pos[1:], *f.allXattr)
		if err != nil {
			return nil, err
		}
		mo, err := f.options()
		if err != nil {
			return nil, err
		}
		specs := make([]client.MutateInSpec, len(parsed))
		for i := range parsed {
			if specs[i], err = parsed[i].clientSpec(*f.createPath); err != nil {
				return nil, err
			}
		}
		return func(s *session) int {
			mo.Timeout = inv.opTimeout
			r, err := s.col.MutateIn(ctx, key, specs, mo)
			if err != nil {
				return inv.fail(key, "mutate", err)
			}
			inv.mutatedIn(key, parsed, r)
			return exitOK
		}, nil
	})
}

// options checks mutate's flags against each other and builds the
// client's options from them.
func (f *mutateFlags) options() (*client.MutateInOptions, error) {
	mo := &client.MutateInOptions{Cas: uint64(f.cas), Expiry: *f.expiry, PreserveExpiry: *f.preserve,
		AccessDeleted: *f.deleted, CreateAsDeleted: *f.asDeleted, ReviveDocument: *f.revive}
	switch {
	case *f.upsertDoc && *f.insertDoc:
		return nil, errors.New("--upsert-doc and --insert-doc exclude each other")
	case *f.upsertDoc:
		mo.StoreSemantic = client.StoreSemanticsUpsert
	case *f.insertDoc:
		mo.StoreSemantic = client.StoreSemanticsInsert
	}
	switch {
	case *f.expiry < 0:
		return nil, fmt.Errorf("--expiry %v: want a positive duration", *f.expiry)
	case *f.expiry > 0 && *f.preserve:
		return nil, errors.New("--expiry and --preserve-expiry exclude each other")
	case *f.insertDoc && f.cas != 0:
		return nil, errors.New("--insert-doc takes no --cas")
	case *f.asDeleted && !*f.upsertDoc && !*f.insertDoc:
		return nil, errors.New("--create-as-deleted needs --upsert-doc or --insert-doc")
	case *f.asDeleted && *f.revive:
		return nil, errors.New("--create-as-deleted and --revive exclude each other")
	}
	return mo, nil
}

// mutatedIn prints mutate's result: the new CAS, and the counters' new
// values.
func (inv *invocation) mutatedIn(key string, parsed []mutateSpec, r client.MutateInResult) {
	res := &jsonResult{Op: "mutate", Key: key, OK: true}
	res.setMutation(r.MutationResult)
	if r.IsDeleted {
		res.Deleted = &r.IsDeleted
	}
	var lines []string
	for i, p := range parsed {
		v, _ := r.ValueAt(i)
		if v == nil {
			continue
		}
		jp := jsonPath{Path: p.path, Xattr: p.xattr}
		jp.setValue(v)
		res.Paths = append(res.Paths, jp)
		lines = append(lines, inv.pathLabel(p.path, p.xattr)+"\t"+string(v))
	}
	if inv.g.json {
		inv.printJSON(res)
		return
	}
	state := ""
	if r.IsDeleted {
		state = " (deleted)"
	}
	fmt.Fprintf(inv.env.stdout, "mutated %q cas=%s%s\n", key, fmtCas(r.Cas), state)
	for _, l := range lines {
		fmt.Fprintln(inv.env.stdout, l)
	}
}
