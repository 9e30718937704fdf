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

	"github.com/kvwire/kvwire/internal/kverr"
)

// SASL mechanism names as Couchbase Server lists them (note: no hyphen
// between SHA and the digits, unlike the IANA names SCRAM-SHA-1 and
// SCRAM-SHA-256).
const (
	MechPlain       = "PLAIN"
	MechScramSHA1   = "SCRAM-SHA1"
	MechScramSHA256 = "SCRAM-SHA256"
	MechScramSHA512 = "SCRAM-SHA512"
)

// MaxScramIterations bounds the iteration count a client accepts from a
// server, so that a hostile server cannot make it spin: PBKDF2 is not
// interruptible, and 1M SHA-512 iterations take about 2 s on a loaded core.
// Couchbase Server's default is 15,000.
const MaxScramIterations = 1_000_000

// scramIterationLimit is MaxScramIterations; the fuzz tests lower it so that
// an accepted count costs milliseconds, not seconds.
var scramIterationLimit = MaxScramIterations

// PlainPayload builds the SASL PLAIN message: authzid (empty), NUL, user,
// NUL, password. A NUL inside user or password would shift the fields the
// server reads: check them with CheckCredentials first.
func PlainPayload(user, password string) []byte {
	b := make([]byte, 0, 2+len(user)+len(password))
	b = append(b, 0)
	b = append(b, user...)
	b = append(b, 0)
	return append(b, password...)
}

// CheckCredentials rejects a user name or password that no SASL mechanism
// can carry intact: one containing NUL (PLAIN's field separator, and
// forbidden in SCRAM's saslname). The error is an *EncodeError naming the
// field, never its value.
func CheckCredentials(user, password string) error {
	if strings.IndexByte(user, 0) >= 0 {
		return badRequest("SASL user name", "contains NUL")
	}
	if strings.IndexByte(password, 0) >= 0 {
		return badRequest("SASL password", "contains NUL")
	}
	return nil
}

// DecodePlainPayload splits a SASL PLAIN message (for servers and tests):
// authzid, NUL, user, NUL, password. The user must not be empty.
func DecodePlainPayload(b []byte) (authzid, user, password string, err error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", "", "", malformed("SASL PLAIN message", "separator", "no NUL after the authzid")
	}
	j := bytes.IndexByte(b[i+1:], 0)
	if j < 0 {
		return "", "", "", malformed("SASL PLAIN message", "separator", "no NUL after the user name")
	}
	j += i + 1
	if j == i+1 {
		return "", "", "", malformed("SASL PLAIN message", "user", "empty")
	}
	if bytes.IndexByte(b[j+1:], 0) >= 0 {
		return "", "", "", malformed("SASL PLAIN message", "password", "contains NUL")
	}
	return string(b[:i]), string(b[i+1 : j]), string(b[j+1:]), nil
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
// uses it: no channel binding (gs2 header "n,,") and no SASLprep (user names
// and passwords are sent as their UTF-8 bytes, as Couchbase's servers expect).
// It is a pure state machine; use it as
//
//	first := c.ClientFirst()                 // SASL_AUTH value
//	final, err := c.ClientFinal(serverFirst) // SASL_STEP value
//	err = c.VerifyServerFinal(serverFinal)   // checks the server signature
//
// A ScramClient is not safe for concurrent use.
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
// (tests pass a fixed one); nil draws 24 random bytes. A nonce must be
// printable ASCII without ','.
func NewScramClient(mechanism, user, password string, nonce func() (string, error)) (*ScramClient, error) {
	h := ScramHash(mechanism)
	if h == nil {
		return nil, badRequest("SASL mechanism", "%q is not a SCRAM mechanism", mechanism)
	}
	if err := CheckCredentials(user, password); err != nil {
		return nil, err
	}
	if nonce == nil {
		nonce = randomNonce
	}
	n, err := nonce()
	if err != nil {
		return nil, err
	}
	if !validNonce(n) {
		return nil, badRequest("SCRAM nonce", "must be non-empty printable ASCII without ','")
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

// validNonce: RFC 5802 printable = %x21-2B / %x2D-7E.
func validNonce(n string) bool { return nonceOf(n, 0x21) }

// nonceOf reports whether n is non-empty and made of bytes from lo to 0x7e
// other than ','.
func nonceOf(n string, lo byte) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < lo || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// serverAcceptsClientNonce is the server's check of a client nonce, which is
// Couchbase Server's rather than RFC 5802's: kv_engine's cbsasl
// (cbsasl/scram-sha/scram-sha.cc, ScramShaBackend::addAttribute for 'r')
// takes any non-empty nonce of C-locale isprint characters other than ',',
// i.e. 0x20-0x7e: the space RFC 5802 leaves out is accepted, and Couchbase's
// C++ SDK core sends nonces with spaces. Bytes outside that range are
// rejected as the server rejects them.
func serverAcceptsClientNonce(n string) bool { return nonceOf(n, 0x20) }

// Mechanism returns the mechanism name.
func (c *ScramClient) Mechanism() string { return c.mech }

// ClientFirst returns the client-first-message, "n,,n=<user>,r=<nonce>",
// with ',' and '=' in the user name escaped as RFC 5802 requires.
func (c *ScramClient) ClientFirst() []byte {
	c.clientFirstBare = "n=" + scramEscape(c.user) + ",r=" + c.nonce
	c.step = 1
	return []byte("n,," + c.clientFirstBare)
}

// ClientFinal takes the server-first-message and returns the
// client-final-message with the proof. A malformed server-first-message
// (missing or out-of-order attributes, a nonce that does not extend the
// client's, bad base64, an iteration count outside 1..MaxScramIterations, a
// mandatory extension) is a *DecodeError.
func (c *ScramClient) ClientFinal(serverFirst []byte) ([]byte, error) {
	if c.step != 1 {
		return nil, badRequest("SCRAM", "ClientFinal called out of order")
	}
	const what = "SCRAM server-first-message"
	attrs, err := scramAttrs(what, serverFirst)
	if err != nil {
		return nil, err
	}
	if attrs[0].key == 'e' {
		return nil, &scramError{msg: "server refused: " + attrs[0].val, auth: true}
	}
	if attrs[0].key == 'm' {
		return nil, malformed(what, "m", "mandatory extension not supported")
	}
	if err := scramExpect(what, attrs, 'r', 's', 'i'); err != nil {
		return nil, err
	}
	nonce := attrs[0].val
	if !validNonce(nonce) || !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) {
		return nil, malformed(what, "r", "nonce does not extend the client nonce")
	}
	salt, err := base64.StdEncoding.DecodeString(attrs[1].val)
	if err != nil || len(salt) == 0 {
		return nil, malformed(what, "s", "salt is missing or not base64")
	}
	iters, ok := parseIterations(attrs[2].val)
	if !ok {
		return nil, malformed(what, "i", "iteration count %q is not in 1..%d", truncate(attrs[2].val, 32), MaxScramIterations)
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

// parseIterations accepts decimal digits only, in 1..MaxScramIterations.
func parseIterations(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n >= 1 && n <= scramIterationLimit
}

// VerifyServerFinal checks the server-final-message's signature. An error
// matching kverr.ErrAuthenticationFailure means the server did not prove it
// knows the password, or answered e=...; other errors are malformed messages.
func (c *ScramClient) VerifyServerFinal(serverFinal []byte) error {
	if c.step != 2 {
		return badRequest("SCRAM", "VerifyServerFinal called out of order")
	}
	const what = "SCRAM server-final-message"
	attrs, err := scramAttrs(what, serverFinal)
	if err != nil {
		return err
	}
	if attrs[0].key == 'e' {
		return &scramError{msg: "server refused: " + attrs[0].val, auth: true}
	}
	if err := scramExpect(what, attrs, 'v'); err != nil {
		return err
	}
	got, err := base64.StdEncoding.DecodeString(attrs[0].val)
	if err != nil || len(got) == 0 {
		return malformed(what, "v", "server signature missing or not base64")
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
	if iterations < 1 || len(salt) == 0 {
		return ScramKeys{}, badRequest("SCRAM keys", "need a salt and at least one iteration")
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
// and tests). It is not safe for concurrent use.
type ScramServer struct {
	mech        string
	newHash     func() hash.Hash
	lookup      func(user string) (ScramKeys, bool)
	nonce       func() (string, error)
	user        string
	keys        ScramKeys
	known       bool
	gs2Header   string
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
// server-first-message. Channel binding and authorization ids are not
// supported (gs2 header "n,," or "y,,"). An unknown user gets a salt derived
// from the user name so that the exchange fails only at the proof, as real
// servers do.
func (s *ScramServer) ServerFirst(clientFirst []byte) ([]byte, error) {
	if s.step != 0 {
		return nil, badRequest("SCRAM", "ServerFirst called out of order")
	}
	const what = "SCRAM client-first-message"
	var rest []byte
	switch {
	case bytes.HasPrefix(clientFirst, []byte("n,,")), bytes.HasPrefix(clientFirst, []byte("y,,")):
		s.gs2Header = string(clientFirst[:3])
		rest = clientFirst[3:]
	case bytes.HasPrefix(clientFirst, []byte("p=")):
		return nil, malformed(what, "gs2 header", "channel binding is not supported")
	default:
		return nil, malformed(what, "gs2 header", "want \"n,,\" (no channel binding, no authzid)")
	}
	attrs, err := scramAttrs(what, rest)
	if err != nil {
		return nil, err
	}
	if attrs[0].key == 'm' {
		return nil, malformed(what, "m", "mandatory extension not supported")
	}
	if err := scramExpect(what, attrs, 'n', 'r'); err != nil {
		return nil, err
	}
	user, err := scramUnescape(attrs[0].val)
	if err != nil || user == "" {
		return nil, malformed(what, "n", "user name missing or badly escaped")
	}
	cnonce := attrs[1].val
	if !serverAcceptsClientNonce(cnonce) {
		return nil, malformed(what, "r", "nonce missing or not printable")
	}
	snonce, err := s.nonce()
	if err != nil {
		return nil, err
	}
	if !validNonce(snonce) {
		return nil, badRequest("SCRAM nonce", "server nonce must be non-empty printable ASCII without ','")
	}
	s.user = user
	s.keys, s.known = s.lookup(user)
	if !s.known {
		sum := s.newHash()
		sum.Write([]byte("memdx unknown SCRAM user:" + user))
		s.keys = ScramKeys{Salt: sum.Sum(nil)[:16], Iterations: 4096}
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
// matching kverr.ErrAuthenticationFailure; a malformed message is a *DecodeError.
func (s *ScramServer) ServerFinal(clientFinal []byte) ([]byte, error) {
	if s.step != 1 {
		return nil, badRequest("SCRAM", "ServerFinal called out of order")
	}
	const what = "SCRAM client-final-message"
	i := bytes.LastIndex(clientFinal, []byte(",p="))
	if i < 0 {
		return nil, malformed(what, "p", "proof missing")
	}
	withoutProof := clientFinal[:i]
	attrs, err := scramAttrs(what, withoutProof)
	if err != nil {
		return nil, err
	}
	if err := scramExpect(what, attrs, 'c', 'r'); err != nil {
		return nil, err
	}
	if attrs[0].val != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, malformed(what, "c", "channel binding does not match the gs2 header")
	}
	if attrs[1].val != s.fullNonce {
		return nil, malformed(what, "r", "nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(string(clientFinal[i+3:]))
	if err != nil || len(proof) == 0 {
		return nil, malformed(what, "p", "proof is missing or not base64")
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

type scramAttr struct {
	key byte
	val string
}

// scramAttrs splits "k=v,k=v" into its attributes, in order. Each must be a
// letter, '=', and a value (RFC 5802 section 7); there is at least one.
func scramAttrs(what string, msg []byte) ([]scramAttr, error) {
	parts := strings.Split(string(msg), ",")
	attrs := make([]scramAttr, 0, len(parts))
	for _, part := range parts {
		if len(part) < 2 || part[1] != '=' || !isASCIILetter(part[0]) {
			return nil, malformed(what, "attribute", "%q is not k=v", truncate(part, 32))
		}
		attrs = append(attrs, scramAttr{key: part[0], val: part[2:]})
	}
	return attrs, nil
}

// scramExpect checks that attrs starts with the given keys, in order.
// Attributes after them are extensions, which RFC 5802 says to ignore.
func scramExpect(what string, attrs []scramAttr, keys ...byte) error {
	for i, k := range keys {
		if i >= len(attrs) {
			return malformed(what, string(k), "attribute missing")
		}
		if attrs[i].key != k {
			return malformed(what, string(k), "attribute %d is %q, want %q", i+1, string(attrs[i].key), string(k))
		}
	}
	return nil
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

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

// scramError is a SCRAM failure that is not a malformed message: the peer
// refused or failed to prove the password (auth) or a protocol misuse.
type scramError struct {
	msg  string
	auth bool
}

func (e *scramError) Error() string { return "memdx: SCRAM: " + e.msg }

func (e *scramError) Is(target error) bool {
	return e.auth && target == kverr.ErrAuthenticationFailure
}
