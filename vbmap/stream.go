package vbmap

import "bytes"

// streamSeparator ends each config in an HTTP streaming body
// (/pools/default/bucketsStreaming/<bucket>, /pools/default/bs/<bucket>).
var streamSeparator = []byte("\n\n\n\n")

// ScanStreamConfigs is a bufio.SplitFunc that cuts an HTTP config stream into
// configs: the server writes each config followed by "\n\n\n\n". Tokens are
// trimmed of surrounding white space; empty ones are skipped. At EOF the
// remaining bytes, if any are not white space, are the last token. Parse
// each token with Parse.
//
// Parse does not accept a whole stream: two configs are not one JSON
// document. The HTTP transport itself (connecting, authenticating, reconnecting)
// is not part of this package.
func ScanStreamConfigs(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for {
		i := bytes.Index(data[advance:], streamSeparator)
		if i < 0 {
			break
		}
		tok := bytes.TrimSpace(data[advance : advance+i])
		advance += i + len(streamSeparator)
		if len(tok) > 0 {
			return advance, tok, nil
		}
	}
	if atEOF {
		if tok := bytes.TrimSpace(data[advance:]); len(tok) > 0 {
			return len(data), tok, nil
		}
		return len(data), nil, nil
	}
	return advance, nil, nil
}
