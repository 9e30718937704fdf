package kvotel

import (
	"context"
	"runtime/debug"
	"testing"
	"time"
)

// The tracer's and the meter's instrumentation scope is named after this
// package's import path, and versioned with this module's version as the
// program's build information gives it: the version a program built with
// kvotel as a dependency requires (a replacement's, when replaced), none
// when it has none (a test's "(devel)", no build information).
func TestScopeVersion(t *testing.T) {
	defer func(f func() (*debug.BuildInfo, bool)) { readBuildInfo = f }(readBuildInfo)
	dep := func(version string, replace *debug.Module) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
				Deps: []*debug.Module{nil, {Path: "github.com/kvwire/kvwire", Version: "v0.9.0"},
					{Path: modulePath, Version: version, Replace: replace}}}, true
		}
	}
	for _, tc := range []struct {
		name string
		read func() (*debug.BuildInfo, bool)
		want string
	}{
		{"a dependency", dep("v1.2.3", nil), "v1.2.3"},
		{"replaced by another version", dep("v1.2.3", &debug.Module{Path: modulePath, Version: "v1.2.4"}), "v1.2.4"},
		{"replaced by a directory", dep("v1.2.3", &debug.Module{Path: "../kvotel"}), ""},
		{"the main module", func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, true
		}, ""},
		{"no build information", func() (*debug.BuildInfo, bool) { return nil, false }, ""},
	} {
		readBuildInfo = tc.read
		sr, tp := newRecorder(t)
		NewTracer(tp).RequestSpan(context.Background(), "get", nil, time.Now()).End(time.Now())
		spans := sr.Ended()
		if len(spans) != 1 {
			t.Fatalf("%s: %d spans", tc.name, len(spans))
		}
		if s := spans[0].InstrumentationScope(); s.Name != ScopeName || s.Version != tc.want {
			t.Errorf("%s: tracer scope %q %q, want %q %q", tc.name, s.Name, s.Version, ScopeName, tc.want)
		}
		reader, mp := newReader(t)
		r, err := NewMeter(mp).ValueRecorder("n", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.RecordValue(1)
		rm := collectScopes(t, reader)
		if len(rm) != 1 || rm[0].Name != ScopeName || rm[0].Version != tc.want {
			t.Errorf("%s: meter scopes %v, want %q %q", tc.name, rm, ScopeName, tc.want)
		}
	}
}
