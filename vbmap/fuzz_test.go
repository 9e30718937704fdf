package vbmap

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/conformance"
)

// FuzzParse: Parse never panics; what it rejects is a *ParseError; what it
// accepts routes every vbucket copy (current and forward map) to a server
// index in range or to an explicit error, and routes keys through RouteState
// and Ketama without panicking. Seeds: every conformance config (when the
// corpus is present) and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	dir := conformance.Path("configs")
	if _, err := os.Stat(dir); err != nil && conformance.Required() {
		conformance.Missing(f, dir, err)
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, "localhost")
			f.Add(b, "::1")
		}
		return nil
	})
	for _, name := range []string{"serverlist_only.json", "verbose_nodes_reordered.json", "serverlist_unmatched.json", "two_networks.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b, "")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, src string) {
		c, err := Parse(data, src)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidConfig) || pe.Field == "" {
				t.Fatalf("error is not a *ParseError naming a field: %#v", err)
			}
			if c != nil {
				t.Fatal("config and error both returned")
			}
			return
		}
		checkRoutesEverything(t, c)
		if c.HasVbucketMap() && c.Locator() != LocatorVbucket {
			t.Fatalf("locator %v with a vbucket map", c.Locator())
		}
		if c.Ketama() != nil && c.Locator() != LocatorKetama {
			t.Fatalf("locator %v with a ketama ring", c.Locator())
		}
		for i := 0; i < c.NumServers(); i++ {
			for _, net := range []string{"", "default", "external"} {
				if a, ok := c.ServerKVAddr(i, net, false); ok && !strings.Contains(a, ":") {
					t.Fatalf("address %q", a)
				}
				c.ServerKVAddr(i, net, true)
			}
			if n := c.ServerNode(i); n < -1 || n >= len(c.Nodes()) {
				t.Fatalf("ServerNode(%d) = %d of %d nodes", i, n, len(c.Nodes()))
			}
		}
		_ = c.DetectNetwork(src)
		for _, key := range []string{"", "a", "hello", "Key_42"} {
			var rs RouteState
			s, vb, err := rs.Route(c, []byte(key), 0)
			if err == nil && (s < 0 || s >= c.NumServers()) {
				t.Fatalf("Route(%q) = server %d of %d", key, s, c.NumServers())
			}
			if c.HasVbucketMap() && int(vb) >= c.NumVbuckets() {
				t.Fatalf("Route(%q) = vb %d of %d", key, vb, c.NumVbuckets())
			}
			rs.OnNotMyVbucket(c)
			if rs.OnForwardMap() != c.HasForwardMap() {
				t.Fatalf("after NMV: forward %v, config has forward map %v", rs.OnForwardMap(), c.HasForwardMap())
			}
			s, _, err = rs.Route(c, []byte(key), 0)
			if err == nil && (s < 0 || s >= c.NumServers()) {
				t.Fatalf("forward Route(%q) = server %d of %d", key, s, c.NumServers())
			}
		}
		if c.Version().Compare(c.Version()) != 0 || c.Newer(c) {
			t.Fatal("a config is newer than itself")
		}
	})
}
