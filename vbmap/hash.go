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
	h := (crc32.ChecksumIEEE(key) >> 16) & 0x7fff
	return uint16(int(h) % numVbuckets)
}
