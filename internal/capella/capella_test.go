package capella

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bundled certificate is the one its doc comment describes: Capella's
// root CA, a CA, by its fingerprint.
func TestRootCAParses(t *testing.T) {
	ca, err := RootCA()
	require.NoError(t, err)
	assert.True(t, ca.IsCA)
	assert.Equal(t, []string{"Couchbase"}, ca.Subject.Organization)
	assert.Equal(t, []string{"Cloud"}, ca.Subject.OrganizationalUnit)
	assert.Equal(t, ca.Subject.String(), ca.Issuer.String(), "a root: self-issued")
	assert.Equal(t, time.Date(2029, 12, 6, 23, 12, 59, 0, time.UTC), ca.NotAfter.UTC())
	sum := sha256.Sum256(ca.Raw)
	hex := strings.ToUpper(strings.Join(strings.Split(fmt.Sprintf("% x", sum[:]), " "), ":"))
	assert.Equal(t, "D0:93:7E:9C:93:4B:2D:AB:94:ED:7A:4B:91:C5:48:E7:9E:EC:CA:99:2B:27:AB:6D:26:20:80:7E:68:65:7C:0E", hex)
}
