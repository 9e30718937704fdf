package vbmap

import "hash/crc32"

// VbucketForKey maps a document key to its vbucket the way Couchbase Server
// does: the IEEE CRC32 of the key, shifted right 16 bits, masked to 15 bits,
// modulo numVbuckets. The key is the document key alone, WITHOUT the
// LEB128 collection-id prefix that goes on the wire. It returns 0 when
// numVbuckets is not positive. It allocates nothing.
func VbucketForKey(key []byte, numVbuckets int) uint16 {
	if numVbuckets <= 0 {
		return 0
	}
	h := (crcIEEE(key) >> 16) & 0x7fff
	return uint16(int(h) % numVbuckets)
}

// clmulCutoff is where hash/crc32 switches to carry-less multiplication on
// amd64 (64 bytes); below it, it walks a 1 KiB table one byte at a time
// under 16 bytes and slices by 8 (a tail under 8 bytes still byte by byte)
// from there.
const clmulCutoff = 64

// crcIEEE is crc32.ChecksumIEEE(p). Keys under 64 bytes, nearly all of
// them, are sliced by 8 from 8 bytes and by 4 from 4: a 12-byte key costs
// two rounds of independent table loads instead of a chain of 12 dependent
// ones, whose latency the cache misses of a busy caller multiply (issue 25:
// perf record of benchcmp's mock/get-32B cell: crc32 0.12 -> 0.08 µs/op
// at 16 goroutines, 0.22 -> 0.10 at 1; BenchmarkRoute 33 -> 18 ns;
// BenchmarkHashCold, a 12-byte key, about 30 -> 5 ns with L1 evicted and
// 65 -> 26 ns with L2 evicted). Longer keys go to hash/crc32 (CLMUL where
// the CPU has it).
func crcIEEE(p []byte) uint32 {
	if len(p) >= clmulCutoff {
		return crc32.ChecksumIEEE(p)
	}
	t := &crcTables
	crc := ^uint32(0)
	for len(p) >= 8 {
		crc ^= uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][crc>>16&0xff] ^ t[6][crc>>8&0xff] ^ t[7][crc&0xff]
		p = p[8:]
	}
	if len(p) >= 4 {
		crc ^= uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24
		crc = t[0][crc>>24] ^ t[1][crc>>16&0xff] ^ t[2][crc>>8&0xff] ^ t[3][crc&0xff]
		p = p[4:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// crcTables are the slicing-by-8 tables of the IEEE polynomial (reflected
// 0xedb88320): crcTables[0] is the byte-at-a-time table, and crcTables[k][b]
// is the CRC of byte b followed by k zero bytes.
var crcTables = func() (t [8][256]uint32) {
	for i := range 256 {
		c := uint32(i)
		for range 8 {
			c = c>>1 ^ crc32.IEEE&-(c&1)
		}
		t[0][i] = c
	}
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xff] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()
