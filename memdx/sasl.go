package memdx

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
)

// SASL mechanism names as Couchbase Server lists them.
const (
	MechPlain       = "PLAIN"
	MechScramSHA1   = "SCRAM-SHA1"
	MechScramSHA256 = "SCRAM-SHA256"
	MechScramSHA512 = "SCRAM-SHA512"
)

// ErrAuthFailed is matched by SCRAM errors that mean the peer failed to prove
// it knows the password (a bad server signature, or a bad client proof on the
// server side).
var ErrAuthFailed = errors.New("memdx: SASL authentication failed")

// MaxScramIterations bounds the iteration count a client accepts from a
// server, so that a hostile server cannot make it spin for minutes.
const MaxScramIterations = 10_000_000

// PlainPayload builds the SASL PLAIN message: authzid (empty), NUL, user,
// NUL, password.
func PlainPayload(user, password string) []byte {
	b := make([]byte, 0, 2+len(user)+len(password))
	b = append(b, 0)
	b = append(b, user...)
	b = append(b, 0)
	return append(b, password...)
}

// ScramHash returns the hash constructor for a SCRAM mechanism, or nil when
// the name is not one.
func ScramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case MechScramSHA1:
		return sha1.New
	case MechScramSHA256:
		return sha256.New
	case MechScramSHA512:
		return sha512.New
	}
	return nil
}

// ScramClient is the client side of SCRAM (RFC 5802, RFC 7677) as Couchbase
// uses it: no channel binding (gs2 header "n,,"). Use it as
//
//	first := c.ClientFirst()                 // SASL_AUTH value
//	final, err := c.ClientFinal(serverFirst) // SASL_STEP value
//	err = c.VerifyServerFinal(serverFinal)   // checks the server signature
type ScramClient struct {
	mech     string
	newHash  func() hash.Hash
	user     string
	password string
	nonce    string

	clientFirstBare string
	authMessage     string
	saltedPassword  []byte
	step            int
}

// NewScramClient starts a SCRAM exchange. nonce supplies the client nonce
// (tests pass a fixed one); nil draws 24 random bytes.
func NewScramClient(mechanism, user, password string, nonce func() (string, error)) (*ScramClient, error) {
	h := ScramHash(mechanism)
	if h == nil {
		return nil, badRequest("SASL mechanism", "%q is not a SCRAM mechanism", mechanism)
	}
	if nonce == nil {
		nonce = randomNonce
	}
	n, err := nonce()
	if err != nil {
		return nil, err
	}
	if n == "" || strings.ContainsRune(n, ',') {
		return nil, badRequest("SCRAM nonce", "must be non-empty and contain no comma")
	}
	return &ScramClient{mech: mechanism, newHash: h, user: user, password: password, nonce: n}, nil
}

func randomNonce() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b[:]), nil
}

// Mechanism returns the mechanism name.
func (c *ScramClient) Mechanism() string { return c.mech }

// ClientFirst returns the client-first-message.
func (c *ScramClient) ClientFirst() []byte {
	c.clientFirstBare = "n=" + scramEscape(c.user) + ",r=" + c.nonce
	c.step = 1
	return []byte("n,," + c.clientFirstBare)
}

// ClientFinal takes the server-first-message and returns the
// client-final-message with the proof.
func (c *ScramClient) ClientFinal(serverFirst []byte) ([]byte, error) {
	if c.step != 1 {
		return nil, badRequest("SCRAM", "ClientFinal called out of order")
	}
	attrs, err := scramAttrs("server-first-message", serverFirst)
	if err != nil {
		return nil, err
	}
	if e, ok := attrs['e']; ok {
		return nil, &scramError{msg: "server refused: " + e}
	}
	nonce, ok := attrs['r']
	if !ok || !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) {
		return nil, malformed("SCRAM server-first-message", "r", "nonce does not extend the client nonce")
	}
	salt, err := base64.StdEncoding.DecodeString(attrs['s'])
	if err != nil || len(salt) == 0 {
		return nil, malformed("SCRAM server-first-message", "s", "salt is missing or not base64")
	}
	iters, err := strconv.Atoi(attrs['i'])
	if err != nil || iters < 1 || iters > MaxScramIterations {
		return nil, malformed("SCRAM server-first-message", "i", "iteration count %q is not in 1..%d", attrs['i'], MaxScramIterations)
	}
	c.saltedPassword, err = pbkdf2.Key(c.newHash, c.password, salt, iters, c.newHash().Size())
	if err != nil {
		return nil, err
	}
	withoutProof := "c=biws,r=" + nonce
	c.authMessage = c.clientFirstBare + "," + string(serverFirst) + "," + withoutProof
	proof := scramClientProof(c.newHash, c.saltedPassword, c.authMessage)
	c.step = 2
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

// VerifyServerFinal checks the server-final-message's signature. An error
// matching ErrAuthFailed means the server did not prove it knows the
// password.
func (c *ScramClient) VerifyServerFinal(serverFinal []byte) error {
	if c.step != 2 {
		return badRequest("SCRAM", "VerifyServerFinal called out of order")
	}
	attrs, err := scramAttrs("server-final-message", serverFinal)
	if err != nil {
		return err
	}
	if e, ok := attrs['e']; ok {
		return &scramError{msg: "server refused: " + e}
	}
	got, err := base64.StdEncoding.DecodeString(attrs['v'])
	if err != nil || len(got) == 0 {
		return malformed("SCRAM server-final-message", "v", "server signature missing or not base64")
	}
	want := scramServerSignature(c.newHash, c.saltedPassword, c.authMessage)
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return &scramError{msg: "server signature does not match", auth: true}
	}
	c.step = 3
	return nil
}

// ScramKeys are the per-user secrets a SCRAM server keeps.
type ScramKeys struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// DeriveScramKeys computes the stored and server keys for a password.
func DeriveScramKeys(mechanism, password string, salt []byte, iterations int) (ScramKeys, error) {
	h := ScramHash(mechanism)
	if h == nil {
		return ScramKeys{}, badRequest("SASL mechanism", "%q is not a SCRAM mechanism", mechanism)
	}
	sp, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return ScramKeys{}, err
	}
	ck := hmacSum(h, sp, []byte("Client Key"))
	sum := h()
	sum.Write(ck)
	return ScramKeys{Salt: salt, Iterations: iterations, StoredKey: sum.Sum(nil),
		ServerKey: hmacSum(h, sp, []byte("Server Key"))}, nil
}

// ScramServer is the server side of one SCRAM exchange (for the mock cluster
// and tests).
type ScramServer struct {
	mech        string
	newHash     func() hash.Hash
	lookup      func(user string) (ScramKeys, bool)
	nonce       func() (string, error)
	user        string
	keys        ScramKeys
	known       bool
	fullNonce   string
	authMessage string
	step        int
}

// NewScramServer starts a server exchange. lookup returns a user's keys;
// nonce supplies the server nonce part (nil draws random bytes).
func NewScramServer(mechanism string, lookup func(user string) (ScramKeys, bool), nonce func() (string, error)) (*ScramServer, error) {
	h := ScramHash(mechanism)
	if h == nil {
		return nil, badRequest("SASL mechanism", "%q is not a SCRAM mechanism", mechanism)
	}
	if nonce == nil {
		nonce = randomNonce
	}
	return &ScramServer{mech: mechanism, newHash: h, lookup: lookup, nonce: nonce}, nil
}

// User is the user named in the client-first-message.
func (s *ScramServer) User() string { return s.user }

// ServerFirst takes the client-first-message and returns the
// server-first-message. An unknown user gets a made-up salt so that the
// exchange fails only at the proof, as real servers do.
func (s *ScramServer) ServerFirst(clientFirst []byte) ([]byte, error) {
	if s.step != 0 {
		return nil, badRequest("SCRAM", "ServerFirst called out of order")
	}
	rest, ok := bytes.CutPrefix(clientFirst, []byte("n,,"))
	if !ok {
		return nil, malformed("SCRAM client-first-message", "gs2 header", "want \"n,,\" (no channel binding)")
	}
	attrs, err := scramAttrs("client-first-message", rest)
	if err != nil {
		return nil, err
	}
	user, err := scramUnescape(attrs['n'])
	if err != nil || user == "" {
		return nil, malformed("SCRAM client-first-message", "n", "user name missing or badly escaped")
	}
	cnonce := attrs['r']
	if cnonce == "" {
		return nil, malformed("SCRAM client-first-message", "r", "nonce missing")
	}
	snonce, err := s.nonce()
	if err != nil {
		return nil, err
	}
	s.user = user
	s.keys, s.known = s.lookup(user)
	if !s.known {
		s.keys = ScramKeys{Salt: []byte("unknown-user-salt"), Iterations: 4096}
	}
	s.fullNonce = cnonce + snonce
	first := "r=" + s.fullNonce + ",s=" + base64.StdEncoding.EncodeToString(s.keys.Salt) +
		",i=" + strconv.Itoa(s.keys.Iterations)
	s.authMessage = string(rest) + "," + first
	s.step = 1
	return []byte(first), nil
}

// ServerFinal takes the client-final-message, checks the proof and returns
// the server-final-message. A wrong proof (or unknown user) returns an error
// matching ErrAuthFailed.
func (s *ScramServer) ServerFinal(clientFinal []byte) ([]byte, error) {
	if s.step != 1 {
		return nil, badRequest("SCRAM", "ServerFinal called out of order")
	}
	i := bytes.LastIndex(clientFinal, []byte(",p="))
	if i < 0 {
		return nil, malformed("SCRAM client-final-message", "p", "proof missing")
	}
	withoutProof := clientFinal[:i]
	attrs, err := scramAttrs("client-final-message", clientFinal)
	if err != nil {
		return nil, err
	}
	if attrs['c'] != "biws" {
		return nil, malformed("SCRAM client-final-message", "c", "channel binding must be biws")
	}
	if attrs['r'] != s.fullNonce {
		return nil, malformed("SCRAM client-final-message", "r", "nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(attrs['p'])
	if err != nil {
		return nil, malformed("SCRAM client-final-message", "p", "proof is not base64")
	}
	s.authMessage += "," + string(withoutProof)
	s.step = 2
	if !s.known {
		return nil, &scramError{msg: "unknown user", auth: true}
	}
	sig := hmacSum(s.newHash, s.keys.StoredKey, []byte(s.authMessage))
	if len(proof) != len(sig) {
		return nil, &scramError{msg: "client proof has the wrong length", auth: true}
	}
	clientKey := make([]byte, len(sig))
	for j := range sig {
		clientKey[j] = proof[j] ^ sig[j]
	}
	h := s.newHash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.keys.StoredKey) != 1 {
		return nil, &scramError{msg: "client proof does not match", auth: true}
	}
	serverSig := hmacSum(s.newHash, s.keys.ServerKey, []byte(s.authMessage))
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), nil
}

// ScramProofs computes the client proof and the server signature for an
// auth message directly: for checking test vectors.
func ScramProofs(mechanism, password string, salt []byte, iterations int, authMessage string) (clientProof, serverSignature []byte, err error) {
	h := ScramHash(mechanism)
	if h == nil {
		return nil, nil, badRequest("SASL mechanism", "%q is not a SCRAM mechanism", mechanism)
	}
	sp, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return nil, nil, err
	}
	return scramClientProof(h, sp, authMessage), scramServerSignature(h, sp, authMessage), nil
}

func scramClientProof(h func() hash.Hash, saltedPassword []byte, authMessage string) []byte {
	clientKey := hmacSum(h, saltedPassword, []byte("Client Key"))
	sum := h()
	sum.Write(clientKey)
	sig := hmacSum(h, sum.Sum(nil), []byte(authMessage))
	for i := range clientKey {
		clientKey[i] ^= sig[i]
	}
	return clientKey
}

func scramServerSignature(h func() hash.Hash, saltedPassword []byte, authMessage string) []byte {
	return hmacSum(h, hmacSum(h, saltedPassword, []byte("Server Key")), []byte(authMessage))
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// scramAttrs parses "k=v,k=v" into a map keyed by the attribute letter.
func scramAttrs(what string, msg []byte) (map[byte]string, error) {
	attrs := make(map[byte]string, 4)
	for _, part := range strings.Split(string(msg), ",") {
		if len(part) < 2 || part[1] != '=' {
			return nil, malformed("SCRAM "+what, "attribute", "%q is not k=v", truncate(part, 32))
		}
		if _, dup := attrs[part[0]]; dup {
			return nil, malformed("SCRAM "+what, "attribute", "%q appears twice", part[:1])
		}
		attrs[part[0]] = part[2:]
	}
	return attrs, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// scramEscape escapes a user name for the n= attribute (RFC 5802 5.1).
func scramEscape(s string) string {
	if !strings.ContainsAny(s, ",=") {
		return s
	}
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

func scramUnescape(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		default:
			return "", errors.New("bad escape")
		}
		i += 2
	}
	return b.String(), nil
}

type scramError struct {
	msg  string
	auth bool
}

func (e *scramError) Error() string { return "memdx: SCRAM: " + e.msg }

func (e *scramError) Is(target error) bool { return e.auth && target == ErrAuthFailed }
