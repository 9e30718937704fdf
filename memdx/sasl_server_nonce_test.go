package memdx

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// cppCoreNonce has the shape of the client nonce Couchbase's C++ SDK core
// (Node.js, Python, Ruby, PHP SDKs) sends: words separated by spaces.
const cppCoreNonce = "0x12 0x29 0xfffffffd 0x5e 0x7f 0xffffffa1 0x0c 0x33"

// The server side takes the client nonces kv_engine's cbsasl takes
// (cbsasl/scram-sha/scram-sha.cc: non-empty, C-locale isprint, no ','),
// spaces included, and completes the exchange with them.
func TestScramServerAcceptsClientNonceWithSpaces(t *testing.T) {
	for _, mech := range []string{MechScramSHA1, MechScramSHA256, MechScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			const user, password = "Administrator", "password"
			salt := []byte("0123456789abcdef")
			keys, err := DeriveScramKeys(mech, password, salt, 64)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewScramServer(mech, func(u string) (ScramKeys, bool) { return keys, u == user },
				func() (string, error) { return "SERVER", nil })
			if err != nil {
				t.Fatal(err)
			}
			bare := "n=" + user + ",r=" + cppCoreNonce
			first, err := s.ServerFirst([]byte("n,," + bare))
			if err != nil {
				t.Fatalf("client-first with the C++ core's nonce: %v", err)
			}
			full := cppCoreNonce + "SERVER"
			if !strings.HasPrefix(string(first), "r="+full+",") {
				t.Fatalf("server-first %q does not carry the nonce %q", first, full)
			}
			withoutProof := "c=biws,r=" + full
			proof, sig, err := ScramProofs(mech, password, salt, 64, bare+","+string(first)+","+withoutProof)
			if err != nil {
				t.Fatal(err)
			}
			final, err := s.ServerFinal([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
			if err != nil {
				t.Fatalf("client-final: %v", err)
			}
			if want := "v=" + base64.StdEncoding.EncodeToString(sig); string(final) != want {
				t.Fatalf("server-final %q, want %q", final, want)
			}
		})
	}
}

// Nonces kv_engine rejects stay rejected: empty, control characters, DEL,
// bytes above 0x7e. (',' cannot reach the check: it ends the attribute.)
func TestScramServerRejectsNonPrintableClientNonce(t *testing.T) {
	for _, nonce := range []string{"", "abc\x01", "tab\there", "del\x7f", "high\x80", "utf8é"} {
		_, s := scramPair(t, MechScramSHA256, "u", "p", "p")
		var de *DecodeError
		if _, err := s.ServerFirst([]byte("n,,n=u,r=" + nonce)); !errors.As(err, &de) || de.Field != "r" {
			t.Errorf("client nonce %q: %v, want a DecodeError on r", nonce, err)
		}
	}
	// The edges of the accepted range.
	for _, nonce := range []string{" ", "~", " a~ "} {
		_, s := scramPair(t, MechScramSHA256, "u", "p", "p")
		if _, err := s.ServerFirst([]byte("n,,n=u,r=" + nonce)); err != nil {
			t.Errorf("client nonce %q: %v, want it accepted", nonce, err)
		}
	}
}
