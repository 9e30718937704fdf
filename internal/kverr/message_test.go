package kverr

import (
	"errors"
	"strings"
	"testing"
)

func TestMessageString(t *testing.T) {
	cause := errors.New("conn: closed")
	m := Message{Op: "Get", Key: "k", Err: ErrTemporaryFailure, Status: 0x86, StatusName: "TMPFAIL",
		ErrorDescription: "try later", ServerContext: "busy", Node: "n1:11210", Vbucket: 7,
		RetryAttempts: 2, RetryReasons: "KV_TEMPORARY_FAILURE", Ambiguous: true, Cause: cause}
	want := `Get "k": temporary failure (status 0x86 TMPFAIL: try later) [server: busy] node=n1:11210 vb=7` +
		` after 2 retries (for KV_TEMPORARY_FAILURE); the request may have been applied: conn: closed`
	if got := m.String(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	m = Message{Op: "Scan", Err: ErrTimeout, RetryAttempts: 1, Cause: ErrTimeout}
	if got, want := m.String(), "Scan: "+ErrTimeout.Error()+" after 1 retry"; got != want {
		t.Fatalf("got %q, want %q (a cause the sentinel already says is left out)", got, want)
	}
	m = Message{Op: "Get", Key: "k", Err: ErrDocumentNotFound, Status: 1, StatusName: "KEY_ENOENT", Cause: cause, CauseIsStatus: true}
	if got, want := m.String(), `Get "k": document not found (status 0x01 KEY_ENOENT)`; got != want {
		t.Fatalf("got %q, want %q (a bare status cause is left out)", got, want)
	}
}

// A sentinel that itself says the request may have been applied
// (ErrAmbiguous, ErrAmbiguousTimeout: the Err of a mutation lost with its
// connection, or of a write whose deadline passed unanswered) is not
// followed by the same words again for Ambiguous; one that does not say
// it (SYNC_WRITE_AMBIGUOUS's) still is.
func TestMessageSaysTheRequestMayHaveBeenAppliedOnce(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{ErrAmbiguous, `Upsert "k": the request may have been applied node=n1:11210 vb=7`},
		{ErrAmbiguousTimeout, `Upsert "k": ambiguous timeout: the request may have been applied node=n1:11210 vb=7`},
		{ErrDurabilityAmbiguous, `Upsert "k": durability ambiguous node=n1:11210 vb=7; the request may have been applied`},
	} {
		m := Message{Op: "Upsert", Key: "k", Err: c.err, Node: "n1:11210", Vbucket: 7, Ambiguous: true}
		if got := m.String(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// The server's error ref (XERROR's "ref") is the id kv_engine's log names
// the failure by: the message carries it beside the context, and alone
// when the server sent no context.
func TestMessageCarriesTheServersRef(t *testing.T) {
	for _, c := range []struct {
		ctx, ref, want string
	}{
		{"busy", "4f1c-77", `Get "k": temporary failure (status 0x86 TMPFAIL) [server: busy; ref 4f1c-77] node=n1:11210 vb=7`},
		{"", "4f1c-77", `Get "k": temporary failure (status 0x86 TMPFAIL) [server ref 4f1c-77] node=n1:11210 vb=7`},
		{"busy", "", `Get "k": temporary failure (status 0x86 TMPFAIL) [server: busy] node=n1:11210 vb=7`},
	} {
		m := Message{Op: "Get", Key: "k", Err: ErrTemporaryFailure, Status: 0x86, StatusName: "TMPFAIL",
			ServerContext: c.ctx, ServerRef: c.ref, Node: "n1:11210", Vbucket: 7}
		if got := m.String(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// A cause that says the server's words again (a timeout's last error, the
// last answer's status error) has them left out of its text: the message
// says them once, in its brackets. Without the brackets, the cause keeps
// them.
func TestMessageSaysTheServersWordsOnce(t *testing.T) {
	cause := errors.New("retry: unambiguous timeout; last error: GET failed with status ETMPFAIL (0x86): busy (ref 4f1c-77)")
	m := Message{Op: "Get", Key: "k", Err: ErrUnambiguousTimeout, Status: 0x86, StatusName: "TMPFAIL",
		ServerContext: "busy", ServerRef: "4f1c-77", Node: "n1:11210", Vbucket: 7, Cause: cause,
		CauseServerText: "GET failed with status ETMPFAIL (0x86): busy (ref 4f1c-77)",
		CauseServerBare: "GET failed with status ETMPFAIL (0x86)"}
	want := ErrUnambiguousTimeout.Error() + ` (status 0x86 TMPFAIL) [server: busy; ref 4f1c-77] node=n1:11210 vb=7` +
		`: retry: unambiguous timeout; last error: GET failed with status ETMPFAIL (0x86)`
	if got := m.String(); got != `Get "k": `+want {
		t.Errorf("got  %s\nwant %s", got, `Get "k": `+want)
	}
	m.ServerContext, m.ServerRef = "", ""
	if got := m.String(); !strings.HasSuffix(got, cause.Error()) {
		t.Errorf("no server words in brackets: %s; want the cause's whole text", got)
	}
}

// The server's words are left out of the cause's text only where that
// text says them whole: a longer text that starts as they do (another
// answer's context, "warming" where the server said "warm") keeps its
// own words; a ReplaceAll cut it to "(0x86)ing".
func TestMessageKeepsWordsThatOnlyStartAsTheServers(t *testing.T) {
	m := Message{Op: "Get", Key: "k", Err: ErrTemporaryFailure, Status: 0x86, StatusName: "TMPFAIL",
		ServerContext:   "warm",
		Cause:           errors.New("GET failed with status ETMPFAIL (0x86): warm; earlier: GET failed with status ETMPFAIL (0x86): warming, GET failed with status ETMPFAIL (0x86): warm_2"),
		CauseServerText: "GET failed with status ETMPFAIL (0x86): warm",
		CauseServerBare: "GET failed with status ETMPFAIL (0x86)"}
	want := `: GET failed with status ETMPFAIL (0x86); earlier: GET failed with status ETMPFAIL (0x86): warming, GET failed with status ETMPFAIL (0x86): warm_2`
	if got := m.String(); !strings.HasSuffix(got, want) {
		t.Errorf("got  %s\nwant it to end %s", got, want)
	}
}
