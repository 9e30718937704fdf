package vbmap

import (
	"math"
	"testing"
)

// The six rev_epoch_compare files, oldest first: epoch first, then rev, a
// missing revEpoch counting as 0 (what couchbase-jvm-clients
// DefaultConfigurationProviderTest expects of these files).
var revEpochOrder = []string{
	"rev_epoch_compare/config_lower_rev_no_epoch.json",      // 0/1
	"rev_epoch_compare/config_higher_rev_no_epoch.json",     // 0/2
	"rev_epoch_compare/config_lower_rev_lower_epoch.json",   // 1/1
	"rev_epoch_compare/config_higher_rev_lower_epoch.json",  // 1/2
	"rev_epoch_compare/config_lower_rev_higher_epoch.json",  // 2/1
	"rev_epoch_compare/config_higher_rev_higher_epoch.json", // 2/2
}

func TestRevEpochReplacementPairwise(t *testing.T) {
	cfgs := make([]*Config, len(revEpochOrder))
	for i, f := range revEpochOrder {
		cfgs[i] = mustParseFile(t, "configs/"+f, "localhost")
	}
	for i := range cfgs {
		for j := range cfgs {
			if got, want := cfgs[j].Newer(cfgs[i]), j > i; got != want {
				t.Errorf("%s held, %s arrives: replaces = %v, want %v", revEpochOrder[i], revEpochOrder[j], got, want)
			}
		}
	}
}

func TestRevUint64Max(t *testing.T) {
	big := mustParseFile(t, "configs/cb_terse_rev_uint64_max.json", "localhost")
	if big.Version() != (Version{0, math.MaxUint64}) {
		t.Fatalf("version %v", big.Version())
	}
	noEpoch2 := mustParseFile(t, "configs/rev_epoch_compare/config_higher_rev_no_epoch.json", "localhost")
	epoch1 := mustParseFile(t, "configs/rev_epoch_compare/config_lower_rev_lower_epoch.json", "localhost")
	if !big.Newer(noEpoch2) || noEpoch2.Newer(big) {
		t.Error("rev 2^64-1 must be newer than rev 2 in the same epoch")
	}
	if big.Newer(epoch1) || !epoch1.Newer(big) {
		t.Error("epoch 1 rev 1 must be newer than epoch 0 rev 2^64-1")
	}
	if big.Newer(big) {
		t.Error("an equal version must not replace")
	}
}

func TestVersionCompare(t *testing.T) {
	cases := []struct {
		a, b Version
		want int
	}{
		{Version{0, 1}, Version{0, 1}, 0},
		{Version{0, 1}, Version{0, 2}, -1},
		{Version{2, 1}, Version{1, 2}, 1}, // rev 1/epoch 2 replaces rev 2/epoch 1
		{Version{-1, 5}, Version{0, 0}, -1},
		{Version{0, math.MaxUint64}, Version{0, math.MaxUint64 - 1}, 1},
		{Version{math.MaxInt64, 0}, Version{math.MinInt64, math.MaxUint64}, 1},
	}
	for _, c := range cases {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := c.b.Compare(c.a); got != -c.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
	if s := (Version{1, 18446744073709551615}).String(); s != "1/18446744073709551615" {
		t.Errorf("String() = %q", s)
	}
}

func TestNewerNilSafe(t *testing.T) {
	c := mustParseFile(t, "configs/cb_terse_7.x_rev_epoch.json", "localhost")
	var nilCfg *Config
	if !c.Newer(nil) || nilCfg.Newer(c) || nilCfg.Newer(nil) {
		t.Fatal("Newer is not nil-safe")
	}
}

// HasRevEpoch tells a config without revEpoch (Epoch 0) from one whose
// revEpoch is 0.
func TestHasRevEpoch(t *testing.T) {
	for _, c := range []struct {
		fields string
		want   bool
		epoch  int64
	}{{`"rev":5`, false, 0}, {`"rev":5,"revEpoch":null`, false, 0}, {`"rev":5,"revEpoch":0`, true, 0},
		{`"rev":5,"revEpoch":2`, true, 2}} {
		cfg, err := Parse([]byte(`{`+c.fields+`,"name":"b","nodeLocator":"vbucket",
			"nodesExt":[{"hostname":"h","services":{"kv":11210}}],
			"vBucketServerMap":{"serverList":["h:11210"],"vBucketMap":[[0]]}}`), "h")
		if err != nil {
			t.Fatalf("%s: %v", c.fields, err)
		}
		if cfg.HasRevEpoch() != c.want || cfg.Version().Epoch != c.epoch {
			t.Errorf("%s: HasRevEpoch %v, epoch %d", c.fields, cfg.HasRevEpoch(), cfg.Version().Epoch)
		}
	}
}
