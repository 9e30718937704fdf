package memdx

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
)

type scramVector struct {
	ID                 string `json:"id"`
	Mechanism          string `json:"mechanism"`
	Username           string `json:"username"`
	Password           string `json:"password"`
	ClientNonce        string `json:"client_nonce"`
	ServerNonceSuffix  string `json:"server_nonce_suffix"`
	SaltB64            string `json:"salt_b64"`
	Iterations         int    `json:"iterations"`
	ClientProofB64     string `json:"client_proof_b64"`
	ServerSignatureB64 string `json:"server_signature_b64"`
	Messages           struct {
		ClientFirst string `json:"client_first"`
		ServerFirst string `json:"server_first"`
		ClientFinal string `json:"client_final"`
		ServerFinal string `json:"server_final"`
	} `json:"messages"`
	Derived struct {
		AuthMessage string `json:"auth_message"`
	} `json:"derived_intermediates"`
}

// couchbaseMech maps the RFCs' mechanism names to Couchbase's.
func couchbaseMech(t *testing.T, m string) string {
	switch m {
	case "SCRAM-SHA-1", MechScramSHA1:
		return MechScramSHA1
	case "SCRAM-SHA-256", MechScramSHA256:
		return MechScramSHA256
	case "SCRAM-SHA-512", MechScramSHA512:
		return MechScramSHA512
	}
	t.Fatalf("unknown mechanism %q", m)
	return ""
}

func loadScramVectors(t *testing.T) []scramVector {
	var out []scramVector
	for _, f := range []string{"scram/rfc_vectors.json", "scram/kv_engine_vectors.json"} {
		var v struct {
			Vectors []scramVector `json:"vectors"`
		}
		if err := json.Unmarshal(readConformance(t, f), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Vectors...)
	}
	if len(out) != 6 {
		t.Fatalf("%d SCRAM vectors, want 6", len(out))
	}
	return out
}

func fixedNonce(n string) func() (string, error) { return func() (string, error) { return n, nil } }

// TestScramVectors runs ScramClient and ScramServer through the RFC 5802
// (SHA-1), RFC 7677 (SHA-256) and kv_engine (SHA-1, SHA-256, SHA-512 and the
// docs/sasl.md SHA-1) exchanges: every message, the proof and the server
// signature must be the vector's bytes.
func TestScramVectors(t *testing.T) {
	for _, v := range loadScramVectors(t) {
		t.Run(v.ID, func(t *testing.T) {
			mech := couchbaseMech(t, v.Mechanism)
			salt, err := base64.StdEncoding.DecodeString(v.SaltB64)
			if err != nil {
				t.Fatal(err)
			}
			proof, sig, err := ScramProofs(mech, v.Password, salt, v.Iterations, v.Derived.AuthMessage)
			if err != nil {
				t.Fatal(err)
			}
			if got := base64.StdEncoding.EncodeToString(proof); got != v.ClientProofB64 {
				t.Errorf("client proof %s, want %s", got, v.ClientProofB64)
			}
			if got := base64.StdEncoding.EncodeToString(sig); got != v.ServerSignatureB64 {
				t.Errorf("server signature %s, want %s", got, v.ServerSignatureB64)
			}

			c, err := NewScramClient(mech, v.Username, v.Password, fixedNonce(v.ClientNonce))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(c.ClientFirst()); got != v.Messages.ClientFirst {
				t.Fatalf("client-first %q, want %q", got, v.Messages.ClientFirst)
			}
			final, err := c.ClientFinal([]byte(v.Messages.ServerFirst))
			if err != nil {
				t.Fatal(err)
			}
			if string(final) != v.Messages.ClientFinal {
				t.Fatalf("client-final %q, want %q", final, v.Messages.ClientFinal)
			}
			if err := c.VerifyServerFinal([]byte(v.Messages.ServerFinal)); err != nil {
				t.Fatalf("VerifyServerFinal: %v", err)
			}

			keys, err := DeriveScramKeys(mech, v.Password, salt, v.Iterations)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewScramServer(mech, func(u string) (ScramKeys, bool) { return keys, u == v.Username },
				fixedNonce(v.ServerNonceSuffix))
			if err != nil {
				t.Fatal(err)
			}
			first, err := s.ServerFirst([]byte(v.Messages.ClientFirst))
			if err != nil || string(first) != v.Messages.ServerFirst {
				t.Fatalf("server-first %q, %v; want %q", first, err, v.Messages.ServerFirst)
			}
			if s.User() != v.Username {
				t.Fatalf("server user %q", s.User())
			}
			sfinal, err := s.ServerFinal([]byte(v.Messages.ClientFinal))
			if err != nil || string(sfinal) != v.Messages.ServerFinal {
				t.Fatalf("server-final %q, %v; want %q", sfinal, err, v.Messages.ServerFinal)
			}
		})
	}
}

func scramPair(t *testing.T, mech, user, clientPassword, serverPassword string) (*ScramClient, *ScramServer) {
	t.Helper()
	keys, err := DeriveScramKeys(mech, serverPassword, []byte("0123456789abcdef"), 64)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewScramClient(mech, user, clientPassword, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScramServer(mech, func(u string) (ScramKeys, bool) { return keys, u == user }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func TestScramClientAgainstServer(t *testing.T) {
	for _, mech := range []string{MechScramSHA1, MechScramSHA256, MechScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, s := scramPair(t, mech, "alice", "secret", "secret")
			if c.Mechanism() != mech {
				t.Fatal(c.Mechanism())
			}
			first, err := s.ServerFirst(c.ClientFirst())
			if err != nil {
				t.Fatal(err)
			}
			final, err := c.ClientFinal(first)
			if err != nil {
				t.Fatal(err)
			}
			sfinal, err := s.ServerFinal(final)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.VerifyServerFinal(sfinal); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestScramWrongPassword(t *testing.T) {
	for _, mech := range []string{MechScramSHA1, MechScramSHA256, MechScramSHA512} {
		c, s := scramPair(t, mech, "alice", "wrong", "secret")
		first, err := s.ServerFirst(c.ClientFirst())
		if err != nil {
			t.Fatal(err)
		}
		final, err := c.ClientFinal(first)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ServerFinal(final); !errors.Is(err, kverr.ErrAuthenticationFailure) || errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: wrong password: %v", mech, err)
		}
	}
	// An unknown user fails the same way, at the proof.
	c, s := scramPair(t, MechScramSHA256, "bob", "secret", "secret")
	s.lookup = func(string) (ScramKeys, bool) { return ScramKeys{}, false }
	first, err := s.ServerFirst(c.ClientFirst())
	if err != nil {
		t.Fatal(err)
	}
	final, err := c.ClientFinal(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ServerFinal(final); !errors.Is(err, kverr.ErrAuthenticationFailure) {
		t.Fatalf("unknown user: %v", err)
	}
}

func TestScramTamperedServerSignature(t *testing.T) {
	c, s := scramPair(t, MechScramSHA512, "alice", "secret", "secret")
	first, _ := s.ServerFirst(c.ClientFirst())
	final, err := c.ClientFinal(first)
	if err != nil {
		t.Fatal(err)
	}
	sfinal, err := s.ServerFinal(final)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := base64.StdEncoding.DecodeString(string(sfinal[2:]))
	sig[0] ^= 1
	tampered := "v=" + base64.StdEncoding.EncodeToString(sig)
	if err := c.VerifyServerFinal([]byte(tampered)); !errors.Is(err, kverr.ErrAuthenticationFailure) {
		t.Fatalf("tampered signature: %v", err)
	}
	// A server that proves nothing fails too.
	c2, s2 := scramPair(t, MechScramSHA1, "alice", "secret", "secret")
	first, _ = s2.ServerFirst(c2.ClientFirst())
	if _, err := c2.ClientFinal(first); err != nil {
		t.Fatal(err)
	}
	if err := c2.VerifyServerFinal([]byte("e=invalid-proof")); !errors.Is(err, kverr.ErrAuthenticationFailure) {
		t.Fatalf("e=invalid-proof: %v", err)
	}
}

func TestScramUserNameEscaping(t *testing.T) {
	for user, escaped := range map[string]string{
		"a,b":   "a=2Cb",
		"a=b":   "a=3Db",
		"=,=,":  "=3D=2C=3D=2C",
		"=2C":   "=3D2C",
		"plain": "plain",
	} {
		c, s := scramPair(t, MechScramSHA256, user, "pw", "pw")
		first := string(c.ClientFirst())
		if want := "n,,n=" + escaped + ",r="; !strings.HasPrefix(first, want) {
			t.Errorf("user %q: client-first %q, want prefix %q", user, first, want)
			continue
		}
		sf, err := s.ServerFirst([]byte(first))
		if err != nil {
			t.Fatalf("user %q: %v", user, err)
		}
		if s.User() != user {
			t.Errorf("server read user %q, want %q", s.User(), user)
		}
		final, err := c.ClientFinal(sf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ServerFinal(final); err != nil {
			t.Errorf("user %q: %v", user, err)
		}
	}
}

// TestScramHostileServerFirst feeds the client server-first-messages that must
// be refused with a DecodeError naming the attribute (or
// kverr.ErrAuthenticationFailure for e=), never a panic and never a proof.
func TestScramHostileServerFirst(t *testing.T) {
	const cn = "clientnonce"
	for _, tc := range []struct {
		msg   string
		field string // "" means kverr.ErrAuthenticationFailure
	}{
		{"", "attribute"},
		{",", "attribute"},
		{"r=clientnonceS", "s"},                          // salt and count missing
		{"r=clientnonceS,s=c2FsdA==", "i"},               // count missing
		{"s=c2FsdA==,r=clientnonceS,i=1", "r"},           // out of order
		{"r=othernonce,s=c2FsdA==,i=4096", "r"},          // does not extend
		{"r=clientnonce,s=c2FsdA==,i=4096", "r"},         // does not add to it
		{"r=clientnonce\x01,s=c2FsdA==,i=4096", "r"},     // not printable
		{"r=clientnonceS,s=!!!,i=4096", "s"},             // bad base64
		{"r=clientnonceS,s=,i=4096", "s"},                // empty salt
		{"r=clientnonceS,s=c2FsdA==,i=0", "i"},           // zero iterations
		{"r=clientnonceS,s=c2FsdA==,i=-1", "i"},          // negative
		{"r=clientnonceS,s=c2FsdA==,i=+4096", "i"},       // sign
		{"r=clientnonceS,s=c2FsdA==,i=4096x", "i"},       // junk
		{"r=clientnonceS,s=c2FsdA==,i=1000001", "i"},     // over MaxScramIterations
		{"r=clientnonceS,s=c2FsdA==,i=99999999999", "i"}, // huge
		{"r=clientnonceS,s=c2FsdA==,i=4294967297", "i"},  // wraps 32 bits
		{"m=ext,r=clientnonceS,s=c2FsdA==,i=1", "m"},     // mandatory extension
		{"r=clientnonceS,s=c2FsdA==,4096", "attribute"},  // not k=v
		{"r=clientnonceS,==x,i=1", "attribute"},          // not a letter
		{"e=other-error", ""},
	} {
		c, err := NewScramClient(MechScramSHA256, "u", "p", fixedNonce(cn))
		if err != nil {
			t.Fatal(err)
		}
		c.ClientFirst()
		final, err := c.ClientFinal([]byte(tc.msg))
		if final != nil {
			t.Errorf("%q: produced a client-final", tc.msg)
		}
		if tc.field == "" {
			if !errors.Is(err, kverr.ErrAuthenticationFailure) {
				t.Errorf("%q: %v, want kverr.ErrAuthenticationFailure", tc.msg, err)
			}
			continue
		}
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("%q: err %v, want a DecodeError on %q", tc.msg, err, tc.field)
		}
	}
	// Extensions after the iteration count are ignored (RFC 5802 section 7).
	c, _ := NewScramClient(MechScramSHA1, "u", "p", fixedNonce(cn))
	c.ClientFirst()
	if _, err := c.ClientFinal([]byte("r=clientnonceS,s=c2FsdA==,i=1,x=future")); err != nil {
		t.Errorf("extension after i: %v", err)
	}
}

func TestScramHostileServerFinal(t *testing.T) {
	for _, tc := range []struct {
		msg, field string
	}{
		{"", "attribute"},
		{"x=1", "v"},
		{"v=", "v"},
		{"v=***", "v"},
		{"v", "attribute"},
	} {
		c, s := scramPair(t, MechScramSHA1, "u", "p", "p")
		first, _ := s.ServerFirst(c.ClientFirst())
		if _, err := c.ClientFinal(first); err != nil {
			t.Fatal(err)
		}
		var de *DecodeError
		if err := c.VerifyServerFinal([]byte(tc.msg)); !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("%q: %v, want a DecodeError on %q", tc.msg, err, tc.field)
		}
	}
}

func TestScramHostileClientMessages(t *testing.T) {
	for _, tc := range []struct {
		msg, field string
	}{
		{"", "gs2 header"},
		{"n,a=admin,n=u,r=x", "gs2 header"},
		{"p=tls-unique,,n=u,r=x", "gs2 header"},
		{"n,,", "attribute"},
		{"n,,r=x,n=u", "n"},
		{"n,,n=u", "r"},
		{"n,,n=,r=x", "n"},
		{"n,,n=a=2Xb,r=x", "n"},
		{"n,,n=u,r=", "r"},
		{"n,,m=x,n=u,r=x", "m"},
	} {
		_, s := scramPair(t, MechScramSHA1, "u", "p", "p")
		var de *DecodeError
		if _, err := s.ServerFirst([]byte(tc.msg)); !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("client-first %q: %v, want a DecodeError on %q", tc.msg, err, tc.field)
		}
	}
	for _, tc := range []struct {
		msg, field string
	}{
		{"c=biws,r=NONCE", "p"},
		{"r=NONCE,c=biws,p=AAAA", "c"},
		{"c=eSws,r=NONCE,p=AAAA", "c"}, // channel binding of "y,," after "n,,"
		{"c=biws,r=other,p=AAAA", "r"},
		{"c=biws,r=NONCE,p=***", "p"},
		{"c=biws,r=NONCE,p=", "p"},
		{"c=biws,p=AAAA", "r"},
	} {
		c, s := scramPair(t, MechScramSHA1, "u", "p", "p")
		first, err := s.ServerFirst(c.ClientFirst())
		if err != nil {
			t.Fatal(err)
		}
		nonce := strings.TrimPrefix(strings.Split(string(first), ",")[0], "r=")
		msg := strings.ReplaceAll(tc.msg, "NONCE", nonce)
		var de *DecodeError
		if _, err := s.ServerFinal([]byte(msg)); !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("client-final %q: %v, want a DecodeError on %q", tc.msg, err, tc.field)
		}
	}
	// A proof of the wrong length is an authentication failure.
	c, s := scramPair(t, MechScramSHA1, "u", "p", "p")
	first, _ := s.ServerFirst(c.ClientFirst())
	nonce := strings.TrimPrefix(strings.Split(string(first), ",")[0], "r=")
	if _, err := s.ServerFinal([]byte("c=biws,r=" + nonce + ",p=AAAA")); !errors.Is(err, kverr.ErrAuthenticationFailure) {
		t.Errorf("short proof: %v", err)
	}
}

func TestScramOutOfOrderAndBadSetup(t *testing.T) {
	if _, err := NewScramClient("SCRAM-MD5", "u", "p", nil); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("unknown mechanism: %v", err)
	}
	for _, n := range []string{"", "a,b", "a b", "ü"} {
		if _, err := NewScramClient(MechScramSHA1, "u", "p", fixedNonce(n)); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("nonce %q accepted: %v", n, err)
		}
	}
	nonceErr := errors.New("no entropy")
	if _, err := NewScramClient(MechScramSHA1, "u", "p", func() (string, error) { return "", nonceErr }); !errors.Is(err, nonceErr) {
		t.Errorf("nonce error lost: %v", err)
	}
	c, s := scramPair(t, MechScramSHA1, "u", "p", "p")
	if _, err := c.ClientFinal([]byte("r=x,s=c2FsdA==,i=1")); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("ClientFinal before ClientFirst: %v", err)
	}
	if err := c.VerifyServerFinal([]byte("v=AAAA")); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("VerifyServerFinal before ClientFinal: %v", err)
	}
	if _, err := s.ServerFinal([]byte("c=biws,r=x,p=AAAA")); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("ServerFinal before ServerFirst: %v", err)
	}
	if _, err := NewScramServer("PLAIN", nil, nil); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("server with PLAIN: %v", err)
	}
	if _, err := DeriveScramKeys(MechScramSHA1, "p", nil, 1); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("keys without salt: %v", err)
	}
	if _, _, err := ScramProofs("nope", "p", []byte("s"), 1, "m"); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("ScramProofs with a bad mechanism: %v", err)
	}
	if ScramHash(MechPlain) != nil || ScramHash(MechScramSHA512)().Size() != 64 {
		t.Error("ScramHash")
	}
}

func TestPlainPayload(t *testing.T) {
	b := PlainPayload("user", "pencil")
	if string(b) != "\x00user\x00pencil" {
		t.Fatalf("PlainPayload = %q", b)
	}
	az, u, p, err := DecodePlainPayload(b)
	if err != nil || az != "" || u != "user" || p != "pencil" {
		t.Fatalf("DecodePlainPayload = %q %q %q %v", az, u, p, err)
	}
	if az, u, p, err := DecodePlainPayload([]byte("admin\x00user\x00")); err != nil || az != "admin" || u != "user" || p != "" {
		t.Fatalf("with authzid: %q %q %q %v", az, u, p, err)
	}
	for _, bad := range []string{"", "user", "\x00user", "\x00\x00pw", "\x00u\x00p\x00w"} {
		if _, _, _, err := DecodePlainPayload([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodePlainPayload(%q) = %v", bad, err)
		}
	}
}

// A NUL in a user name or password would shift PLAIN's fields on the
// server (user "alice\x00x" would log in as "alice"): refused, naming the
// field and not the secret.
func TestCheckCredentialsNUL(t *testing.T) {
	for _, c := range []struct{ user, pass, field string }{
		{"alice\x00x", "pw", "SASL user name"},
		{"alice", "p\x00w", "SASL password"},
	} {
		err := CheckCredentials(c.user, c.pass)
		var ee *EncodeError
		if !errors.As(err, &ee) || ee.Field != c.field || strings.Contains(err.Error(), c.pass) {
			t.Errorf("CheckCredentials(%q, %q) = %v, want an *EncodeError for %s", c.user, c.pass, err, c.field)
		}
		if _, err := NewScramClient(MechScramSHA256, c.user, c.pass, nil); !errors.As(err, &ee) || ee.Field != c.field {
			t.Errorf("NewScramClient(%q, %q) = %v, want an *EncodeError for %s", c.user, c.pass, err, c.field)
		}
	}
	if err := CheckCredentials("alice", "pw"); err != nil {
		t.Fatal(err)
	}
}
