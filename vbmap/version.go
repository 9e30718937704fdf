package vbmap

import "strconv"

// Version orders configs: Epoch first, then Rev. A config without revEpoch
// has Epoch 0. Rev is unsigned because servers send revisions up to 2^64-1
// (cb_terse_rev_uint64_max.json in the conformance corpus); Epoch is signed
// because the server's notifications carry it as a signed 64-bit value that
// is negative while it is not yet set.
type Version struct {
	Epoch int64
	Rev   uint64
}

// Compare returns -1 if v is older than o, 0 if they are equal and +1 if v is
// newer.
func (v Version) Compare(o Version) int {
	switch {
	case v.Epoch < o.Epoch:
		return -1
	case v.Epoch > o.Epoch:
		return 1
	case v.Rev < o.Rev:
		return -1
	case v.Rev > o.Rev:
		return 1
	}
	return 0
}

// Newer reports whether v is strictly newer than o.
func (v Version) Newer(o Version) bool { return v.Compare(o) > 0 }

// String formats v as "epoch/rev".
func (v Version) String() string {
	return strconv.FormatInt(v.Epoch, 10) + "/" + strconv.FormatUint(v.Rev, 10)
}
