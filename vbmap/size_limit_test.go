package vbmap

import (
	"errors"
	"strings"
	"testing"
)

// TestParseRejectsConfigOverSizeLimit: a config one byte over MaxConfigSize
// is rejected without being read (a valid config padded with spaces, which
// would parse, proves the size alone decides); one at the limit parses.
func TestParseRejectsConfigOverSizeLimit(t *testing.T) {
	cfg := `{"rev":7,"name":"b","nodeLocator":"vbucket","nodesExt":[{"hostname":"h","services":{"kv":11210}}],` +
		`"vBucketServerMap":{"serverList":["h:11210"],"vBucketMap":[[0]]}}`
	atLimit := cfg + strings.Repeat(" ", MaxConfigSize-len(cfg))
	c, err := Parse([]byte(atLimit), "")
	if err != nil {
		t.Fatalf("a config of exactly MaxConfigSize bytes: %v", err)
	}
	if c.Version().Rev != 7 {
		t.Fatalf("rev %d, want 7", c.Version().Rev)
	}
	_, err = Parse([]byte(atLimit+" "), "")
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("over the limit: %v, want a *ParseError", err)
	}
	if !strings.Contains(pe.Reason, "8388609 bytes") || !strings.Contains(pe.Reason, "MaxConfigSize") {
		t.Errorf("the error must say the size and the limit: %v", err)
	}
}
