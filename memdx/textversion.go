package memdx

import "bytes"

// AppendTextVersion appends the text command "version\r\n", which a
// memcached that takes text answers with its version: a connection's
// check that the server speaks the text protocol at all.
func AppendTextVersion(dst []byte) []byte { return append(dst, "version\r\n"...) }

// ParseTextVersion parses the answer to a text version command at the
// start of b: "VERSION <version>\r\n". n == 0 with a nil error means b
// does not hold the whole line yet; an error line is a *TextError (n its
// length); anything else wraps ErrMalformed (n == 0), as does a line with
// no \n in its first 512 bytes. version aliases b.
func ParseTextVersion(b []byte) (n int, version []byte, err error) {
	window := b[:min(len(b), maxTextLine)]
	nl := bytes.IndexByte(window, '\n')
	if nl < 0 {
		if len(b) >= maxTextLine {
			return 0, nil, malformed("text version answer", "line", "no \\n in the first %d bytes", maxTextLine)
		}
		return 0, nil, nil
	}
	if nl == 0 || b[nl-1] != '\r' {
		return 0, nil, malformed("text version answer", "line", "ends in \\n without \\r")
	}
	line := b[:nl-1]
	word, rest, _ := bytes.Cut(line, []byte{' '})
	switch string(word) {
	case "VERSION":
		if len(rest) == 0 {
			return 0, nil, malformed("VERSION line", "version", "missing")
		}
		return nl + 1, rest[:len(rest):len(rest)], nil
	case "ERROR", "CLIENT_ERROR", "SERVER_ERROR":
		return nl + 1, nil, &TextError{Kind: string(word), Msg: string(rest)}
	}
	return 0, nil, malformed("text version answer", "line", "%q is not a VERSION line", clip(line))
}
