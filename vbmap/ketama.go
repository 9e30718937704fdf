package vbmap

import (
	"crypto/md5"
	"encoding/binary"
	"slices"
	"strconv"
)

// ketamaPointsPerServer is 40 MD5 digests of 4 points each (SDK-RFC 26).
const (
	ketamaDigestsPerServer = 40
	ketamaPointsPerServer  = ketamaDigestsPerServer * 4
)

// Ketama is a consistent-hashing ring over a list of servers, as memcached
// buckets and plain memcached server lists use it (SDK-RFC 26, libketama):
//
//   - every server string s contributes 160 points: for i in 0..39, the MD5 of
//     "<s>-<i>" gives four little-endian uint32 points (bytes 0-3, 4-7, 8-11,
//     12-15);
//   - the points are sorted ascending (equal points, which the reference data
//     never has, are ordered by server string so that the ring does not depend
//     on the order of the list);
//   - a key hashes to the first four bytes of its MD5, little-endian, and goes
//     to the server of the first point >= that hash, wrapping to the first
//     point.
//
// A Ketama is immutable and safe for concurrent use.
type Ketama struct {
	points  []uint32
	servers []int32 // servers[i] owns points[i]; an index into the list given to NewKetama
	n       int
}

// NewKetama builds the ring for servers, each a "host:port" string exactly as
// it is hashed (for a Couchbase memcached bucket Parse uses the node's
// default-network host and non-TLS KV port, IPv6 hosts in brackets). The
// index Server returns is an index into servers. It returns ErrNoServers for
// an empty list. The ring keeps no reference to servers.
func NewKetama(servers []string) (*Ketama, error) {
	if len(servers) == 0 {
		return nil, ErrNoServers
	}
	type point struct {
		p uint32
		s int32
	}
	pts := make([]point, 0, len(servers)*ketamaPointsPerServer)
	var buf []byte
	for si, s := range servers {
		for i := 0; i < ketamaDigestsPerServer; i++ {
			buf = append(buf[:0], s...)
			buf = append(buf, '-')
			buf = strconv.AppendInt(buf, int64(i), 10)
			d := md5.Sum(buf)
			for k := 0; k < 4; k++ {
				pts = append(pts, point{binary.LittleEndian.Uint32(d[4*k:]), int32(si)})
			}
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.p < b.p:
			return -1
		case a.p > b.p:
			return 1
		case servers[a.s] < servers[b.s]:
			return -1
		case servers[a.s] > servers[b.s]:
			return 1
		}
		return int(a.s) - int(b.s)
	})
	k := &Ketama{
		points:  make([]uint32, len(pts)),
		servers: make([]int32, len(pts)),
		n:       len(servers),
	}
	for i, p := range pts {
		k.points[i] = p.p
		k.servers[i] = p.s
	}
	return k, nil
}

// KetamaHash is the ring position of a key: the first four bytes of its MD5
// digest as a little-endian uint32.
func KetamaHash(key []byte) uint32 {
	d := md5.Sum(key)
	return binary.LittleEndian.Uint32(d[:4])
}

// Server returns the index of the server that owns key. It allocates nothing.
func (k *Ketama) Server(key []byte) int {
	h := KetamaHash(key)
	// First point >= h.
	lo, hi := 0, len(k.points)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if k.points[mid] < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(k.points) {
		lo = 0
	}
	return int(k.servers[lo])
}

// NumServers returns the length of the list the ring was built from.
func (k *Ketama) NumServers() int { return k.n }

// Point is one point of the ring: a hash and the index of its server.
type Point struct {
	Hash   uint32
	Server int
}

// Points returns the ring in ascending order, in a new slice.
func (k *Ketama) Points() []Point {
	out := make([]Point, len(k.points))
	for i := range k.points {
		out[i] = Point{k.points[i], int(k.servers[i])}
	}
	return out
}
