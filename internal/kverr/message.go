package kverr

import (
	"fmt"
	"strings"
)

// Message is what the error of a failed key-value operation says, in plain
// values: client's KeyValueError fills one and renders itself through
// String.
type Message struct {
	Op  string
	Key string // "" for Scan and the per-node operations
	Err error  // the sentinel
	// Status is the server's last status (0 when none); StatusName its
	// error-map name, or else the status's own name.
	Status           uint16
	StatusName       string
	ErrorDescription string
	// StatusNote says what Status likely stands for when it is not what
	// its name says ("" when it is): TMPFAIL for a lock, say.
	StatusNote string
	// ServerContext and ServerRef are the server's extended error
	// information (XERROR): its context, and the ref its log names the
	// failure by.
	ServerContext string
	ServerRef     string
	// CauseServerText is the text within Cause's that says ServerContext
	// and ServerRef again, and CauseServerBare that text without them:
	// the last answer's status error, which a timeout names as its last
	// error and a refused retry as its cause ("GET failed with status
	// ETMPFAIL (0x86): warming (ref 4f1c-77)" and "GET failed with status
	// ETMPFAIL (0x86)"). The message says the server's words once, in its
	// brackets, so the cause's text has the one put in the other's place.
	// "" when the cause does not repeat them.
	CauseServerText string
	CauseServerBare string
	Node            string
	Vbucket         uint16
	// NoVbucket: the operation addresses no vbucket (a node's ping or
	// statistics, a memcached bucket's key); Vbucket is not shown.
	NoVbucket     bool
	RetryAttempts int
	RetryReasons  string // "" when there were none
	Ambiguous     bool
	Cause         error
	// CauseIsStatus: Cause is no more than the bare status error of
	// Status, which the message already says.
	CauseIsStatus bool
}

func (e *Message) String() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Key != "" { // Scan and the per-node operations have none
		fmt.Fprintf(&b, " %q", e.Key)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (status 0x%02x %s", e.Status, e.StatusName)
		if e.ErrorDescription != "" {
			b.WriteString(": " + e.ErrorDescription)
		}
		if e.StatusNote != "" {
			b.WriteString("; " + e.StatusNote)
		}
		b.WriteByte(')')
	}
	switch {
	case e.ServerContext != "" && e.ServerRef != "":
		b.WriteString(" [server: " + e.ServerContext + "; ref " + e.ServerRef + "]")
	case e.ServerContext != "":
		b.WriteString(" [server: " + e.ServerContext + "]")
	case e.ServerRef != "":
		b.WriteString(" [server ref " + e.ServerRef + "]")
	}
	if e.Node != "" && e.NoVbucket {
		b.WriteString(" node=" + e.Node)
	} else if e.Node != "" {
		fmt.Fprintf(&b, " node=%s vb=%d", e.Node, e.Vbucket)
	}
	if e.RetryAttempts > 0 {
		if e.RetryAttempts == 1 {
			b.WriteString(" after 1 retry")
		} else {
			fmt.Fprintf(&b, " after %d retries", e.RetryAttempts)
		}
		if e.RetryReasons != "" {
			b.WriteString(" (for " + e.RetryReasons + ")")
		}
	}
	if e.Ambiguous && e.Err != ErrAmbiguous && e.Err != ErrAmbiguousTimeout {
		// Those two sentinels say it already.
		b.WriteString("; the request may have been applied")
	}
	if e.Cause != nil && !e.CauseIsStatus {
		if c := e.causeText(); c != "" {
			b.WriteString(": ")
			b.WriteString(c)
		}
	}
	return b.String()
}

// causeText is what the cause adds to the message: all of its text, but
// the sentinel's own and the server's words (CauseServerText), which the
// message says already. A cause that is the sentinel adds nothing; one
// that begins with it ("encoding failure: json: unsupported type", as
// fmt.Errorf("%w: ...") makes) adds what follows.
func (e *Message) causeText() string {
	c := e.Cause.Error()
	if e.CauseServerText != "" && (e.ServerContext != "" || e.ServerRef != "") {
		c = replaceWhole(c, e.CauseServerText, e.CauseServerBare)
	}
	if e.Err == nil {
		return c
	}
	s := e.Err.Error()
	if c == s {
		return ""
	}
	if rest, ok := strings.CutPrefix(c, s+": "); ok {
		return rest
	}
	return c
}

// replaceWhole is s with each occurrence of old replaced by new where it
// is whole: not one that a word character (a letter, a digit, '_', any
// byte of a multi-byte one) goes on from, before or after, when old
// starts or ends with one. The server's words end in their context,
// which another text may go on from ("warm" within another answer's
// "warming"): that text keeps its own.
func replaceWhole(s, old, new string) string {
	if old == "" {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(old)
		if (i > 0 && isWordByte(old[0]) && isWordByte(s[i-1])) ||
			(end < len(s) && isWordByte(old[len(old)-1]) && isWordByte(s[end])) {
			// Not whole: keep its first byte and look on after it.
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(new)
		s = s[end:]
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
