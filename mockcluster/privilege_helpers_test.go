package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// privilegeUsers are the users of a privilege test's cluster:
// DefaultUser, who may use every bucket, and "elsewhere", who may use
// none of the default bucket (asElsewhere).
func privilegeUsers() []User {
	return []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "elsewhere", Password: "secret", Buckets: []string{"other"}},
	}
}

// asElsewhere returns r sent impersonating "elsewhere" (FrameImpersonateUser),
// which then holds only the privileges the request grants it: privs, a
// FrameImpersonateUserExtraPrivilege each. r's framing extras are replaced.
func asElsewhere(t *testing.T, r memdx.Request, privs ...string) memdx.Request {
	t.Helper()
	fe, err := memdx.AppendFrameInfo(nil, uint16(memdx.FrameImpersonateUser), []byte("elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range privs {
		if fe, err = memdx.AppendFrameInfo(fe, uint16(memdx.FrameImpersonateUserExtraPrivilege), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	r.FramingExtras = fe
	return r
}
