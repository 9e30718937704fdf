package reftest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// The Node.js SDK (its C++ core) runs the sub-document spec lists its API
// can express (no tombstone options, values it encodes itself) against the
// mock, and kvwire runs the same lists on copies of the documents: every
// step must fail with the same error or give the same per-path statuses and
// values (compared as JSON values, hex CAS and seqno digits masked), and the
// documents must end with the same body and xattrs.

// nodeSubdocScenarios are the lists both run: subdocScenarios' steps that
// the Node.js SDK can express.
var nodeSubdocScenarios = []struct {
	name  string
	seed  string
	steps []sdStep
}{
	{"create with xattrs, macros, counters and arrays", "", subdocScenarios[0].steps},
	{"path failures", subdocScenarios[1].seed, nodeExpressible(subdocScenarios[1].steps)},
	{"document errors and CAS", subdocScenarios[2].seed, subdocScenarios[2].steps},
}

// nodeExpressible drops the steps the Node.js SDK cannot send: a value
// that is not JSON (it encodes values itself), a macro it does not know,
// and a virtual xattr mutation (it has no error class for the answer).
func nodeExpressible(steps []sdStep) []sdStep {
	var out []sdStep
	for _, st := range steps {
		ok := true
		for _, o := range st.mutate {
			if (o.value != "" && !o.macros && !json.Valid([]byte("["+o.value+"]"))) ||
				(o.macros && !strings.HasPrefix(o.value, `"${Mutation.`)) || o.value == `"${Mutation.nope}"` ||
				strings.HasPrefix(o.path, "$") {
				ok = false
			}
		}
		if ok {
			out = append(out, st)
		}
	}
	return out
}

// nodeStepJSON is a step as subdoc.js reads it.
type nodeStepJSON struct {
	Lookup        []nodeOpJSON `json:"lookup,omitempty"`
	Mutate        []nodeOpJSON `json:"mutate,omitempty"`
	Store         string       `json:"store,omitempty"`
	AccessDeleted bool         `json:"accessDeleted,omitempty"`
	CasFromPrev   bool         `json:"casFromPrev,omitempty"`
	CasWrong      bool         `json:"casWrong,omitempty"`
}

type nodeOpJSON struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Value  string `json:"value,omitempty"`
	Xattr  bool   `json:"xattr,omitempty"`
	Mkdir  bool   `json:"mkdir,omitempty"`
	Macros bool   `json:"macros,omitempty"`
}

func nodeOps(ops []sdOp) []nodeOpJSON {
	var out []nodeOpJSON
	for _, o := range ops {
		out = append(out, nodeOpJSON{o.op, o.path, o.value, o.xattr, o.mkdir, o.macros})
	}
	return out
}

type nodeSubdocReport struct {
	Scenarios []struct {
		Name  string `json:"name"`
		Steps []struct {
			Err    string `json:"err"`
			Detail string `json:"detail"`
			Paths  []struct {
				Err   string `json:"err"`
				Value string `json:"value"`
			} `json:"paths"`
			Cas string `json:"cas"`
		} `json:"steps"`
	} `json:"scenarios"`
}

// nodeErrName maps a Node.js SDK error class to errName's names.
func nodeErrName(class string) string {
	switch class {
	case "":
		return ""
	case "DocumentNotFoundError":
		return "not_found"
	case "DocumentExistsError":
		return "exists"
	case "DocumentNotJsonError":
		return "not_json"
	}
	name := strings.TrimSuffix(class, "Error")
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// canonJSON is a JSON text as a comparable value, hex digits masked; ""
// stays "".
func canonJSON(t *testing.T, s string) string {
	t.Helper()
	if s == "" {
		return ""
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q: %v", s, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return mask(string(b))
}

func TestSubdocSameAsNodeSDK(t *testing.T) {
	script := nodeScript(t, "subdoc.js")
	mc, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	cl, err := client.Connect(context.Background(), mc.ConnString()+"/default",
		&client.Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	col := cl.DefaultCollection()

	type scenarioJSON struct {
		Name  string         `json:"name"`
		Key   string         `json:"key"`
		Seed  string         `json:"seed,omitempty"`
		Steps []nodeStepJSON `json:"steps"`
	}
	var in []scenarioJSON
	for i, sc := range nodeSubdocScenarios {
		s := scenarioJSON{Name: sc.name, Key: fmt.Sprintf("node-%d", i), Seed: sc.seed}
		for _, st := range sc.steps {
			s.Steps = append(s.Steps, nodeStepJSON{Lookup: nodeOps(st.lookup), Mutate: nodeOps(st.mutate), Store: st.store,
				AccessDeleted: st.accessDeleted, CasFromPrev: st.casFromPrev, CasWrong: st.casWrong})
		}
		in = append(in, s)
	}
	input, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}

	cfg := baseConfig(t, mc, false)
	cfg.Scope, cfg.Collection = "_default", "_default"
	ctx, cancel := context.WithTimeout(context.Background(), nodeRunLimit)
	defer cancel()
	cmd, sc, stdin, stderr := startNode(t, ctx, script, cfg)
	if _, err := stdin.Write(input); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	line, err := lastLine(sc)
	nodeEnded(t, ctx, "subdoc.js", cmd, err, stderr)
	var rep nodeSubdocReport
	if err := json.Unmarshal(line, &rep); err != nil {
		t.Fatalf("node subdoc.js printed %q: %v\nstderr:\n%s", line, err, stderr.String())
	}
	if len(rep.Scenarios) != len(nodeSubdocScenarios) {
		t.Fatalf("%d scenarios reported, want %d", len(rep.Scenarios), len(nodeSubdocScenarios))
	}

	bucket := mc.Bucket(mockcluster.DefaultBucket)
	stored := func(key string) string {
		d, live := bucket.Get("_default", "_default", key)
		x, deleted, _ := bucket.Xattrs("_default", "_default", key)
		return fmt.Sprintf("%s|live=%t|deleted=%t|%s", d.Value, live, deleted, mask(string(x)))
	}
	for i, sc := range nodeSubdocScenarios {
		kvKey := fmt.Sprintf("kw-node-%d", i)
		r := kvRunner{col, kvKey}
		var prevCas uint64
		if sc.seed != "" {
			res, err := col.Upsert(context.Background(), kvKey, []byte(sc.seed), &client.UpsertOptions{JSON: true})
			if err != nil {
				t.Fatal(err)
			}
			prevCas = res.Cas
		}
		for n, st := range sc.steps {
			var cas uint64
			switch {
			case st.casFromPrev:
				cas = prevCas
			case st.casWrong:
				cas = prevCas + 1
			}
			var out sdOutcome
			var newCas uint64
			if st.lookup != nil {
				out, newCas = r.lookup(st)
			} else {
				out, newCas = r.mutate(t, st, cas)
			}
			if newCas != 0 {
				prevCas = newCas
			}
			node := rep.Scenarios[i].Steps[n]
			if got := nodeErrName(node.Err); got != out.err {
				t.Errorf("%s step %d: kvwire error %q, Node.js SDK %q (%s)", sc.name, n, out.err, got, node.Detail)
				continue
			}
			if out.err != "" {
				continue
			}
			var kw, nd []string
			for j, p := range out.paths {
				if st.lookup != nil {
					e, v, _ := strings.Cut(p, "|")
					if st.lookup[j].op == "exists" {
						// The Node.js SDK answers true or false; kvwire
						// the path's status.
						switch e {
						case "":
							e, v = "", "true"
						case "path_not_found":
							e, v = "", "false"
						}
					}
					kw = append(kw, e+"|"+canonJSON(t, v))
				} else {
					kw = append(kw, canonJSON(t, p))
				}
				if j < len(node.Paths) {
					np := node.Paths[j]
					if st.lookup != nil {
						nd = append(nd, nodeErrName(np.Err)+"|"+canonJSON(t, np.Value))
					} else {
						nd = append(nd, canonJSON(t, np.Value))
					}
				}
			}
			if !reflect.DeepEqual(kw, nd) {
				t.Errorf("%s step %d:\nkvwire       %q\nNode.js SDK  %q", sc.name, n, kw, nd)
			}
		}
		if a, b := stored(kvKey), stored(fmt.Sprintf("node-%d", i)); a != b {
			t.Errorf("%s: the documents differ:\nkvwire       %s\nNode.js SDK  %s", sc.name, a, b)
		}
	}
}
