package memdx

import "github.com/golang/snappy"

// CompressSnappy compresses src in the snappy block format the server's
// Snappy datatype uses. It writes into dst's capacity when it is large enough
// (snappy.MaxEncodedLen(len(src))) and allocates otherwise.
func CompressSnappy(dst, src []byte) []byte {
	return snappy.Encode(dst[:cap(dst)], src)
}

// DecompressSnappy decompresses a snappy value, refusing one that declares a
// decoded length over maxLen (0 means DefaultMaxBodyLength) before anything
// is allocated. It writes into dst's capacity when it is large enough. On
// success the result is never nil: an empty value is an empty slice.
func DecompressSnappy(dst, src []byte, maxLen int) ([]byte, error) {
	if maxLen <= 0 {
		maxLen = DefaultMaxBodyLength
	}
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, malformed("snappy value", "header", "%v", err)
	}
	if n > maxLen {
		return nil, malformed("snappy value", "decoded length", "%d bytes exceeds the limit of %d", n, maxLen)
	}
	out, err := snappy.Decode(dst[:cap(dst)], src)
	if err != nil {
		return nil, malformed("snappy value", "data", "%v", err)
	}
	if out == nil { // snappy.Decode gives dst[:0] for an empty value: nil with a nil dst
		out = []byte{}
	}
	return out, nil
}
