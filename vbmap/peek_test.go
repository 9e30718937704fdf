package vbmap

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/kvwire/kvwire/internal/conformance"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPeekVersion(t *testing.T) {
	cases := []struct {
		in   string
		want Version
		ok   bool
	}{
		{`{"rev":5}`, Version{Rev: 5}, true},
		{` { "name":"b", "revEpoch" : 2, "x":[1,{"rev":9}], "rev": 7 } `, Version{Epoch: 2, Rev: 7}, true},
		{`{"rev":18446744073709551615}`, Version{Rev: 1<<64 - 1}, true},
		{`{"revEpoch":-1,"rev":3}`, Version{Epoch: -1, Rev: 3}, true},
		{`{"s":"}\"{","rev":4}`, Version{Rev: 4}, true},
		{`{"rev":1,"rev":2}`, Version{Rev: 2}, true}, // encoding/json keeps the last
		{`{"name":"x"}`, Version{}, false},           // no rev
		{`{"Rev":5}`, Version{}, false},              // json would match it, case-insensitively
		{`{"r\u0065v":5}`, Version{}, false},
		{`{"rev":5.0}`, Version{}, false},
		{`{"rev":-5}`, Version{}, false},
		{`{"rev":05}`, Version{}, false},
		{`{"rev":null}`, Version{}, false},
		{`{"rev":5`, Version{}, false},
		{`[1]`, Version{}, false},
		{``, Version{}, false},
	}
	for _, c := range cases {
		v, ok := PeekVersion([]byte(c.in))
		assert.Equal(t, c.ok, ok, c.in)
		if c.ok {
			assert.Equal(t, c.want, v, c.in)
		}
	}
}

// On every conformance config, PeekVersion agrees with Parse.
func TestPeekVersionConformance(t *testing.T) {
	files := conformance.Glob(t, "configs/*.json")
	files = append(files, conformance.Glob(t, "configs/rev_epoch_compare/*.json")...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		c, err := Parse(b, "localhost")
		v, ok := PeekVersion(b)
		if err != nil || !ok {
			continue
		}
		assert.Equal(t, c.Version(), v, f)
	}
}

func TestPeekVersionAllocs(t *testing.T) {
	b := []byte(`{"rev":1234,"revEpoch":2,"vBucketServerMap":{"vBucketMap":[[0,1],[1,0]]}}`)
	assert.Zero(t, testing.AllocsPerRun(100, func() { PeekVersion(b) }))
}

// FuzzPeekVersion: whenever PeekVersion answers and Parse accepts the same
// bytes, they agree on the version.
func FuzzPeekVersion(f *testing.F) {
	for _, s := range []string{`{"rev":5}`, `{"rev":1,"revEpoch":2,"nodes":[]}`, `{"Rev":1,"rev":2}`} {
		f.Add([]byte(s))
	}
	for _, b := range conformance.Seeds(f, "configs/*.json") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := PeekVersion(b)
		if !ok {
			return
		}
		c, err := Parse(b, "localhost")
		if err != nil {
			return
		}
		if c.Version() != v {
			t.Fatalf("PeekVersion %v, Parse %v", v, c.Version())
		}
	})
}

func BenchmarkPeekVersion(b *testing.B) {
	data := conformance.Read(b, "configs/cb_terse_rebalance_vbmapforward_rev28957.json")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		PeekVersion(data)
	}
}

func TestPeekUUIDs(t *testing.T) {
	cases := []struct {
		in              string
		cluster, bucket string
		ok              bool
	}{
		{`{"rev":5,"uuid":"b1","clusterUUID":"c1"}`, "c1", "b1", true},
		{` { "x":{"clusterUUID":"no"}, "clusterUUID" : "c1" } `, "c1", "", true},
		{`{"rev":5}`, "", "", true},
		{`{"clusterUUID":null,"uuid":"b1"}`, "", "b1", true},
		{`{"clusterUUID":"c1","clusterUUID":"c2"}`, "c2", "", true}, // encoding/json keeps the last
		{`{"ClusterUUID":"c1"}`, "", "", false},                     // json would match it, case-insensitively
		{`{"UUID":"b1"}`, "", "", false},
		{`{"clusterUUID":"c\u0031"}`, "", "", false},
		{`{"cluster\u0055UID":"c1"}`, "", "", false},
		{`{"clusterUUID":"c` + "\xc3\xa9" + `"}`, "", "", false},
		{`{"clusterUUID":1}`, "", "", false},
		{`{"clusterUUID":"c1"`, "", "", false},
		{`[1]`, "", "", false},
	}
	for _, c := range cases {
		cl, b, ok := PeekUUIDs([]byte(c.in))
		assert.Equal(t, c.ok, ok, c.in)
		if c.ok {
			assert.Equal(t, c.cluster, cl, c.in)
			assert.Equal(t, c.bucket, b, c.in)
		}
	}
}

// On every conformance config, PeekUUIDs agrees with Parse.
func TestPeekUUIDsConformance(t *testing.T) {
	files := conformance.Glob(t, "configs/*.json")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		c, err := Parse(b, "localhost")
		cl, bu, ok := PeekUUIDs(b)
		if err != nil || !ok {
			continue
		}
		n++
		assert.Equal(t, c.ClusterUUID(), cl, f)
		assert.Equal(t, c.BucketUUID(), bu, f)
	}
	require.NotZero(t, n, "no conformance config peeked")
}

// FuzzPeekUUIDs: whenever PeekUUIDs answers and encoding/json reads the
// two fields from the same bytes, they agree. The reference is the
// fields' decoding alone (Parse's json.Unmarshal, tags and all, without
// the rest of the config): it accepts far more inputs than Parse, whose
// checks of the rest few fuzzed inputs pass.
func FuzzPeekUUIDs(f *testing.F) {
	for _, s := range []string{`{"rev":5,"uuid":"b","clusterUUID":"c"}`, `{"clusterUUID":null}`, `{"ClusterUUID":"x","clusterUUID":"y"}`,
		`{"a":{"clusterUUID":"n"},"uuid":"u"}`, `{"uuid":"a","uuid":"b"}`, `{"s":"\"uuid\":","uuid":"u"}`} {
		f.Add([]byte(s))
	}
	for _, b := range conformance.Seeds(f, "configs/*.json") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cl, bu, ok := PeekUUIDs(b)
		if !ok {
			return
		}
		var ref struct {
			UUID        string `json:"uuid"`
			ClusterUUID string `json:"clusterUUID"`
		}
		if json.Unmarshal(b, &ref) != nil {
			return
		}
		if ref.ClusterUUID != cl || ref.UUID != bu {
			t.Fatalf("PeekUUIDs %q %q, encoding/json %q %q", cl, bu, ref.ClusterUUID, ref.UUID)
		}
	})
}
