package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// The connection-level commands refuse what kv_engine's validators
// (daemon/mcbp_validators.cc: verify_header and each opcode's own checks)
// refuse, with the same status and error context, and the connection
// stays usable.
func TestConnCommandsValidatePackets(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	with := func(r memdx.Request, f func(*memdx.Request)) memdx.Request { f(&r); return r }
	long := []byte(strings.Repeat("a", 300))
	for _, tc := range []struct {
		name string
		req  memdx.Request
		st   memdx.Status
		ctx  string
	}{
		{"NOOP extras", with(memdx.NewNoop(), func(r *memdx.Request) { r.Extras = []byte{1, 2, 3, 4} }), memdx.StatusInvalidArgs, "Request must not include extras"},
		{"NOOP key", with(memdx.NewNoop(), func(r *memdx.Request) { r.Key = []byte("k") }), memdx.StatusInvalidArgs, "Request must not include key"},
		{"NOOP value", with(memdx.NewNoop(), func(r *memdx.Request) { r.Value = []byte("v") }), memdx.StatusInvalidArgs, "Request must not include value"},
		{"NOOP CAS", with(memdx.NewNoop(), func(r *memdx.Request) { r.Cas = 1 }), memdx.StatusInvalidArgs, "Request CAS must not be set"},
		{"NOOP JSON", with(memdx.NewNoop(), func(r *memdx.Request) { r.Datatype = memdx.DatatypeJSON }), memdx.StatusInvalidArgs, "Request datatype invalid"},
		{"NOOP bad datatype", with(memdx.NewNoop(), func(r *memdx.Request) { r.Datatype = 0x08 }), memdx.StatusInvalidArgs, "Request datatype invalid"},
		{"VERSION key", with(memdx.NewVersion(), func(r *memdx.Request) { r.Key = []byte("k") }), memdx.StatusInvalidArgs, "Request must not include key"},
		{"HELLO CAS", with(memdx.NewHello(nil, stdFeatures), func(r *memdx.Request) { r.Cas = 7 }), memdx.StatusInvalidArgs, "Request CAS must not be set"},
		{"HELLO JSON", with(memdx.NewHello(nil, stdFeatures), func(r *memdx.Request) { r.Datatype = memdx.DatatypeJSON }), memdx.StatusInvalidArgs, "Request datatype invalid"},
		{"HELLO odd", with(memdx.NewHello(nil, nil), func(r *memdx.Request) { r.Value = []byte{0, 7, 0} }), memdx.StatusInvalidArgs, "Request value must be of even length"},
		{"HELLO long key", memdx.NewHello(long, stdFeatures), memdx.StatusInvalidArgs, "Key length exceeds 251"},
		{"SASL_LIST_MECHS value", with(memdx.NewSASLListMechs(), func(r *memdx.Request) { r.Value = []byte("x") }), memdx.StatusInvalidArgs, "Request must not include value"},
		{"SASL_AUTH no mechanism", memdx.NewSASLAuth("", []byte("\x00a\x00b")), memdx.StatusInvalidArgs, "Request must include key"},
		{"GET_ERROR_MAP vbucket", with(memdx.NewGetErrorMap(2), func(r *memdx.Request) { r.Vbucket = 1 }), memdx.StatusInvalidArgs, "Request vbucket id must be 0"},
		{"GET_ERROR_MAP CAS", with(memdx.NewGetErrorMap(2), func(r *memdx.Request) { r.Cas = 1 }), memdx.StatusInvalidArgs, "Request CAS must not be set"},
		{"SELECT_BUCKET value", with(memdx.NewSelectBucket(DefaultBucket), func(r *memdx.Request) { r.Value = []byte("x") }), memdx.StatusInvalidArgs, "Request must not include value"},
		{"SELECT_BUCKET CAS", with(memdx.NewSelectBucket(DefaultBucket), func(r *memdx.Request) { r.Cas = 9 }), memdx.StatusSuccess, ""},
		{"GET_CLUSTER_CONFIG JSON", with(memdx.NewGetClusterConfig(), func(r *memdx.Request) { r.Datatype = memdx.DatatypeJSON }), memdx.StatusInvalidArgs, "Request datatype invalid"},
		{"STAT raw value", with(memdx.NewStat(nil), func(r *memdx.Request) { r.Value = []byte("{}") }), memdx.StatusInvalidArgs, "Datatype must be JSON"},
		{"STAT bad JSON", with(memdx.NewStat(nil), func(r *memdx.Request) { r.Value, r.Datatype = []byte("{"), memdx.DatatypeJSON }), memdx.StatusInvalidArgs, "value is not valid JSON"},
		{"STAT CAS", with(memdx.NewStat(nil), func(r *memdx.Request) { r.Cas = 1 }), memdx.StatusInvalidArgs, "Request CAS must not be set"},
		{"GET_MANIFEST vbucket", with(memdx.NewCollectionsGetManifest(), func(r *memdx.Request) { r.Vbucket = 3 }), memdx.StatusInvalidArgs, "Request vbucket id must be 0"},
		{"GET_ID vbucket", with(memdx.NewCollectionsGetID("_default", "_default"), func(r *memdx.Request) { r.Vbucket = 3 }), memdx.StatusInvalidArgs, "Request vbucket id must be 0"},
		{"GET_ID key and value", with(memdx.NewCollectionsGetID("_default", "_default"), func(r *memdx.Request) { r.Key = []byte("_default._default") }), memdx.StatusInvalidArgs, "Cannot set both key and value"},
	} {
		expectAnswer(t, tc.name, cl.do(tc.req), tc.st, tc.ctx)
	}
	if p := cl.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
		t.Fatalf("NOOP after the refused packets: %s", p.Status)
	}
}
