package vbmap

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// Known key -> vbucket pairs from public sources, so the hash is checked
// against something other than this package:
//   - membase/libvbucket tests/testapp.c@11da3a0d25784e9afe024ce607c385bfacfffd67
//     (4 vbuckets): hello 0, doctor 0, name 3, continue 3, yesterday 0,
//     tomorrow 1, "another key" 2.
//   - couchbaselabs/cbgb vbucket_test.go@b2d5b3a492a6c11fdd75dab3579667d100be563e:
//     "hello" with 1024 vbuckets is 528.
//   - shared conformance packets/jvm_core_io/request_key_only.txt (a GET the
//     Java SDK encoded): key "airline_10" is sent to vbucket 0x0029 = 41,
//     which is its vbucket with 64 vbuckets.
func TestVbucketForKeyKnownPairs(t *testing.T) {
	cases := []struct {
		key string
		n   int
		vb  uint16
	}{
		{"hello", 4, 0},
		{"doctor", 4, 0},
		{"name", 4, 3},
		{"continue", 4, 3},
		{"yesterday", 4, 0},
		{"tomorrow", 4, 1},
		{"another key", 4, 2},
		{"hello", 1024, 528},
		{"airline_10", 64, 41},
	}
	for _, c := range cases {
		if got := VbucketForKey([]byte(c.key), c.n); got != c.vb {
			t.Errorf("VbucketForKey(%q, %d) = %d, want %d", c.key, c.n, got, c.vb)
		}
	}
}

func TestVbucketForKeyDegenerate(t *testing.T) {
	if VbucketForKey([]byte("x"), 0) != 0 || VbucketForKey([]byte("x"), -5) != 0 {
		t.Fatal("non-positive vbucket counts must give 0")
	}
	// 15 bits of hash modulo a count above 2^15 still stays below the count.
	for i := 0; i < 1000; i++ {
		if vb := VbucketForKey([]byte{byte(i), byte(i >> 8)}, 65536); int(vb) >= 32768 {
			t.Fatalf("vb %d from a 15-bit hash", vb)
		}
	}
}

func TestVbucketForKeyAllocs(t *testing.T) {
	key := []byte("some-document-key")
	if a := testing.AllocsPerRun(100, func() { _ = VbucketForKey(key, 1024) }); a != 0 {
		t.Fatalf("VbucketForKey allocates %v times", a)
	}
}

// TestCRCIEEEMatchesStdlib: the short-key CRC that routes every key must be
// crc32.ChecksumIEEE bit for bit, at every length a key can have (0-250)
// and across the 64-byte cutoff where it hands over to hash/crc32, and from
// any alignment of the key in memory.
func TestCRCIEEEMatchesStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 7))
	buf := make([]byte, 260)
	for n := 0; n <= 250; n++ {
		for i := range 200 {
			off := i % 8
			k := buf[off : off+n]
			for j := range k {
				k[j] = byte(r.Uint32())
			}
			if i == 0 {
				clear(k) // and all zeros, all ones
			} else if i == 1 {
				for j := range k {
					k[j] = 0xff
				}
			}
			if got, want := crcIEEE(k), crc32.ChecksumIEEE(k); got != want {
				t.Fatalf("len %d key %x: crcIEEE %08x, crc32.ChecksumIEEE %08x", n, k, got, want)
			}
			if got, want := VbucketForKey(k, 1024), uint16(((crc32.ChecksumIEEE(k)>>16)&0x7fff)%1024); got != want {
				t.Fatalf("len %d key %x: vbucket %d, want %d", n, k, got, want)
			}
		}
	}
}
