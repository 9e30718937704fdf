package mockcluster

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A SCRAM login whose client nonce has spaces, as Couchbase's C++ SDK core
// sends it, succeeds: kv_engine's cbsasl takes any isprint nonce without ','
// (cbsasl/scram-sha/scram-sha.cc), and so does the mock.
func TestScramLoginWithCppCoreNonce(t *testing.T) {
	c := newCluster(t, Options{})
	const nonce = "0x12 0x29 0xfffffffd 0x5e 0x7f 0xffffffa1 0x0c 0x33"
	for _, mech := range []string{memdx.MechScramSHA1, memdx.MechScramSHA256, memdx.MechScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			rc := dialRaw(t, c.Node(0).Addr())
			rc.hello(stdFeatures...)
			bare := "n=" + DefaultUser + ",r=" + nonce
			p := rc.do(memdx.NewSASLAuth(mech, []byte("n,,"+bare)))
			if p.Status != memdx.StatusAuthContinue {
				t.Fatalf("SASL_AUTH with the C++ core's nonce: %s %s", p.Status, p.Value)
			}
			first := string(p.Value)
			attrs := map[string]string{}
			for _, kv := range strings.Split(first, ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					attrs[k] = v
				}
			}
			if !strings.HasPrefix(attrs["r"], nonce) {
				t.Fatalf("server-first %q does not extend the client nonce", first)
			}
			salt, err := base64.StdEncoding.DecodeString(attrs["s"])
			if err != nil {
				t.Fatal(err)
			}
			iters, err := strconv.Atoi(attrs["i"])
			if err != nil {
				t.Fatal(err)
			}
			withoutProof := "c=biws,r=" + attrs["r"]
			proof, _, err := memdx.ScramProofs(mech, DefaultPassword, salt, iters, bare+","+first+","+withoutProof)
			if err != nil {
				t.Fatal(err)
			}
			p = rc.do(memdx.NewSASLStep(mech, []byte(withoutProof+",p="+base64.StdEncoding.EncodeToString(proof))))
			if p.Status != memdx.StatusSuccess {
				t.Fatalf("SASL_STEP: %s", p.Status)
			}
			if st := rc.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
				t.Fatalf("SELECT_BUCKET after the login: %s", st)
			}
		})
	}
}
