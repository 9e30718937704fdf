package mockcluster

import (
	"encoding/json"
	"sync"
	"testing"
)

// A config published while a stream is loading the config to send must
// still reach the stream: the version the stream records as sent has to be
// that of the config it sent. It took the version from a second load, so
// a config published between the two was recorded as sent but never
// written, and the client kept the old map until the next change.
func TestRESTStreamSendsConfigPublishedWhileLoading(t *testing.T) {
	// Set before the cluster starts and reset after it is closed (cleanups
	// run last first), so that no handler reads it meanwhile.
	var b *Bucket
	var once sync.Once
	testHookStreamLoaded = func() {
		once.Do(func() {
			if _, err := b.AddScope("s"); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() { testHookStreamLoaded = nil })
	c := newCluster(t, Options{Nodes: 1})
	b = c.Bucket(DefaultBucket)
	want := b.Rev() + 1
	rc := newREST(t, "http://"+c.Node(0).MgmtAddr(), nil)
	s := rc.openStream("/pools/default/bs/default", DefaultUser, DefaultPassword)
	defer s.close()
	for {
		var cfg struct{ Rev int64 }
		if err := json.Unmarshal(s.next(), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Rev >= want {
			return
		}
	}
}
