package httpconfig

import (
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzMask: mask, on any body and credentials (an empty body or one of
// the secret alone, secrets longer than the body or overlapping each
// other, a password equal to the username or within the token,
// multi-byte characters cut), never panics, shows no secret but within
// a mask it put there, and shows at most maxErrorBody bytes and a mask.
func FuzzMask(f *testing.F) {
	f.Add([]byte(""), "app", "secret")
	f.Add([]byte("secret"), "app", "secret")
	f.Add([]byte(strings.Repeat("x", 195)+"YXBwOnNlY3JldA=="), "app", "secret")
	f.Add([]byte(strings.Repeat("é", 150)), "é", "éé")
	f.Add([]byte("app:app app"), "app", "app")
	f.Add([]byte("]]xx"), "u", "]x")
	f.Add([]byte("YXBwOnNl"), "app", "Nl")
	f.Add([]byte(strings.Repeat("a", 300)), "a", "a")
	f.Fuzz(func(t *testing.T, body []byte, user, pass string) {
		if user == "" || strings.Contains(user+pass, "\x00") {
			return
		}
		c := New(Config{Username: user, Password: pass})
		secrets := c.secrets()
		longest := 0
		for _, s := range secrets {
			longest = max(longest, len(s))
		}
		// get reads no more than this.
		body = body[:min(len(body), maxErrorBody+longest)]
		out := mask(body, secrets)
		if len(out) > maxErrorBody+len(masked) {
			t.Fatalf("mask shows %d bytes, more than %d and a mask", len(out), maxErrorBody)
		}
		// Masks stand for a secret: what is left of the text around them
		// holds none.
		plain := strings.ReplaceAll(out, masked, "\x00")
		for _, s := range secrets {
			if strings.Contains(plain, s) {
				t.Fatalf("mask(%q) = %q holds the secret %q", body, out, s)
			}
		}
		if base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) != secrets[0] {
			t.Fatalf("secrets %q do not start with the Basic auth token", secrets)
		}
	})
}
