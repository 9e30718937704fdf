package example

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The README's example's placeholders: its hosts, user, password (from
// CB_PASSWORD), bucket, and the collection and document it reads.
const (
	exampleHosts  = "10.0.0.1,10.0.0.2"
	exampleUser   = "app"
	examplePass   = "secret"
	exampleBucket = "travel-sample"
)

// TestReadmeOpenTelemetryExampleExports runs README.md's OpenTelemetry
// program (the Go program that imports kvotel), as written but for the
// mock's address in place of 10.0.0.1,10.0.0.2, against the mock cluster,
// with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a collector of this test's
// own, and checks that the collector received, over OTLP/HTTP, the get's
// span under the kvotel scope with its dispatch span, and the get's
// latency in db.client.operation.duration.
func TestReadmeOpenTelemetryExampleExports(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example with the go command")
	}
	mc := exampleCluster(t)
	col, out, err := runReadmeProgram(t, mc)
	if err != nil {
		t.Fatalf("README.md's OpenTelemetry program fails: %v\n%s", err, out)
	}

	spans, metrics := col.received()
	var get, dispatch bool
	for _, req := range spans {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				if ss.Scope.GetName() != "github.com/kvwire/kvwire/kvotel" {
					continue
				}
				for _, s := range ss.Spans {
					switch s.Name {
					case "get":
						get = true
						// A success: Ok, as README.md says (RFC 0067).
						if s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_OK {
							t.Errorf("the get's span status %v, want Ok", s.GetStatus())
						}
					case client.SpanDispatchToServer:
						dispatch = true
					}
				}
			}
		}
	}
	if !get || !dispatch {
		t.Errorf("the collector received no get span with a dispatch span (%d span exports)", len(spans))
	}
	var latency bool
	for _, req := range metrics {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name != client.MetricOperationDuration || m.Unit != "s" {
						continue
					}
					for _, dp := range m.GetHistogram().GetDataPoints() {
						for _, a := range dp.Attributes {
							if a.Key == client.AttributeOperationName && a.Value.GetStringValue() == "get" && dp.Count > 0 {
								latency = true
							}
						}
					}
				}
			}
		}
	}
	if !latency {
		t.Errorf("the collector received no latency of the get in %s (%d metric exports)", client.MetricOperationDuration, len(metrics))
	}
}

// runReadmeProgram runs README.md's OpenTelemetry program as written but
// for mc's address in place of 10.0.0.1,10.0.0.2, with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at a collector of its own, and
// returns the collector, the program's output and its error.
func runReadmeProgram(t *testing.T, mc *mockcluster.Cluster) (*collector, []byte, error) {
	t.Helper()
	program := readmeOTelProgram(t)
	col := newCollector(t)
	dir, err := os.MkdirTemp(".", ".readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	hosts := strings.TrimPrefix(mc.ConnString(), "couchbase://")
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(strings.ReplaceAll(program, exampleHosts, hosts)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+filepath.Base(dir))
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+col.srv.URL, "CB_PASSWORD="+examplePass)
	out, err := cmd.CombinedOutput()
	return col, out, err
}

// README.md's OpenTelemetry program, when its get fails (here the
// document is missing), still exports the get's span before it exits
// with the error: a program that exits through log.Fatal skips its
// deferred Shutdowns, and the batched spans and the metrics of the
// failure, the ones a user would look for, were never sent.
func TestReadmeOpenTelemetryExampleExportsAFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example with the go command")
	}
	mc := exampleClusterWithoutDoc(t)
	col, out, err := runReadmeProgram(t, mc)
	if err == nil {
		t.Fatalf("README.md's OpenTelemetry program succeeded without the document:\n%s", out)
	}
	spans, _ := col.received()
	var get bool
	for _, req := range spans {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if s.Name == "get" {
						get = true
						// A missing document: status Ok, RFC 0067's "not an
						// error code like document not found", with its
						// error.type, as README.md says.
						if s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_OK {
							t.Errorf("the missing document's get span status %v, want Ok", s.GetStatus())
						}
						var et string
						for _, a := range s.Attributes {
							if a.Key == "error.type" {
								et = a.GetValue().GetStringValue()
							}
						}
						if et != "DocumentNotFound" {
							t.Errorf("the missing document's get span error.type %q, want DocumentNotFound", et)
						}
					}
				}
			}
		}
	}
	if !get {
		t.Errorf("the program exited with %v and the collector received no get span (%d span exports)\n%s", err, len(spans), out)
	}
}

// readmeOTelProgram returns README.md's Go program that imports kvotel
// (the root module's TestDocExamplesRun leaves it to this test).
func readmeOTelProgram(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	var found []string
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		code := strings.Join(lines[start:i], "\n") + "\n"
		if strings.HasPrefix(code, "package main\n") && strings.Contains(code, `"github.com/kvwire/kvwire/kvotel"`) {
			found = append(found, code)
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d Go programs importing kvotel, want 1", len(found))
	}
	return found[0]
}

// exampleClusterWithoutDoc is a mock cluster with what README's examples
// expect but the document: the bucket travel-sample with a scope app
// holding users, the user app.
func exampleClusterWithoutDoc(t *testing.T) *mockcluster.Cluster {
	t.Helper()
	mc, err := mockcluster.New(mockcluster.Options{
		Buckets: []mockcluster.BucketOptions{{Name: exampleBucket}},
		Users:   []mockcluster.User{{Name: exampleUser, Password: examplePass, Buckets: []string{"*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	b := mc.Bucket(exampleBucket)
	if _, err := b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddCollection("app", "users"); err != nil {
		t.Fatal(err)
	}
	return mc
}

// exampleCluster is exampleClusterWithoutDoc with the document u:1.
func exampleCluster(t *testing.T) *mockcluster.Cluster {
	t.Helper()
	mc := exampleClusterWithoutDoc(t)
	if _, err := mc.Bucket(exampleBucket).Set("app", "users", "u:1", []byte(`{"name":"Ada"}`), client.CommonFlagsJSON, 0); err != nil {
		t.Fatal(err)
	}
	return mc
}

// collector is an OTLP/HTTP collector: it takes the exports of traces and
// metrics (protobuf, as the exporters send them by default) and keeps
// them.
type collector struct {
	srv     *httptest.Server
	mu      sync.Mutex
	spans   []*coltrace.ExportTraceServiceRequest
	metrics []*colmetrics.ExportMetricsServiceRequest
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("want a protobuf POST: %v", err), http.StatusBadRequest)
		return
	}
	var msg proto.Message
	var keep func()
	switch r.URL.Path {
	case "/v1/traces":
		req := &coltrace.ExportTraceServiceRequest{}
		msg, keep = req, func() { c.spans = append(c.spans, req) }
	case "/v1/metrics":
		req := &colmetrics.ExportMetricsServiceRequest{}
		msg, keep = req, func() { c.metrics = append(c.metrics, req) }
	default:
		http.NotFound(w, r)
		return
	}
	if err := proto.Unmarshal(body, msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	keep()
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (c *collector) received() ([]*coltrace.ExportTraceServiceRequest, []*colmetrics.ExportMetricsServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans, c.metrics
}
