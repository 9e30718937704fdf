package vbmap

import "sync/atomic"

// Holder holds the current config of one bucket (or the global config) for
// concurrent readers. Load is one atomic load; Update installs a config only
// if it is newer (Version: epoch, then rev) than the one held, with a
// compare-and-swap loop, so configs arriving concurrently from several nodes
// can never move the holder backwards. The zero value holds nothing.
//
// A Holder does not check that the configs it is given belong to one bucket;
// keep one Holder per bucket.
type Holder struct {
	p atomic.Pointer[Config]
}

// Load returns the current config, or nil before the first Update.
func (h *Holder) Load() *Config { return h.p.Load() }

// Update installs c if it is newer than the held config (or nothing is held).
// It returns the config held afterwards and whether c was installed. A nil c
// changes nothing.
func (h *Holder) Update(c *Config) (current *Config, changed bool) {
	for {
		old := h.p.Load()
		if !c.Newer(old) {
			return old, false
		}
		if h.p.CompareAndSwap(old, c) {
			return c, true
		}
	}
}
