package memdx

// Collection ids prefix a document key as unsigned LEB128 once HELLO
// Collections is negotiated. Ids are 32-bit, so a prefix is 1 to 5 bytes.

// MaxLEB128Len is the longest unsigned LEB128 encoding of a uint32.
const MaxLEB128Len = 5

// AppendULEB128 appends v as unsigned LEB128.
func AppendULEB128(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// uleb128Len is the size of v's unsigned LEB128 encoding.
func uleb128Len(v uint32) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// putULEB128 writes v into b (which must hold MaxLEB128Len bytes) and returns
// the number of bytes written.
func putULEB128(b *[MaxLEB128Len]byte, v uint32) int {
	n := 0
	for v >= 0x80 {
		b[n] = byte(v) | 0x80
		v >>= 7
		n++
	}
	b[n] = byte(v)
	return n + 1
}

// DecodeULEB128 decodes the unsigned LEB128 value at the start of b and
// returns it with the number of bytes it took. It rejects a value that does
// not end within 5 bytes, one that does not fit in 32 bits, and a
// non-canonical encoding (a trailing zero byte after a continuation), which
// would let two keys name the same document.
func DecodeULEB128(b []byte) (uint32, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < MaxLEB128Len; i++ {
		c := b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i > 0 && c == 0 {
				return 0, 0, malformed("LEB128", "byte "+itoaSmall(i), "non-canonical encoding (redundant zero byte)")
			}
			if v > 0xffffffff {
				return 0, 0, malformed("LEB128", "value", "does not fit in 32 bits")
			}
			return uint32(v), i + 1, nil
		}
	}
	if len(b) < MaxLEB128Len {
		return 0, 0, malformed("LEB128", "length", "input ends inside the value")
	}
	return 0, 0, malformed("LEB128", "length", "longer than %d bytes", MaxLEB128Len)
}

// AppendCollectionKey appends a key prefixed with its collection id.
func AppendCollectionKey(dst []byte, collectionID uint32, key []byte) []byte {
	return append(AppendULEB128(dst, collectionID), key...)
}

// SplitCollectionKey splits a collection-prefixed key into the collection id
// and the document key (which aliases b).
func SplitCollectionKey(b []byte) (uint32, []byte, error) {
	cid, n, err := DecodeULEB128(b)
	if err != nil {
		return 0, nil, err
	}
	return cid, b[n:], nil
}

func itoaSmall(i int) string { return string(rune('0' + i)) }
