package memdx

import (
	"errors"
	"testing"
)

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) || de.Field != field || !errors.Is(err, ErrMalformed) {
		t.Errorf("%s: err = %v, want a DecodeError on %q", what, err, field)
	}
}

func TestDecodeGetFlags(t *testing.T) {
	p := Packet{OpCode: OpGAT, Extras: mustHex(t, "02000006")}
	if f, err := DecodeGetFlags(&p); err != nil || f != 0x02000006 {
		t.Fatalf("flags %x %v", f, err)
	}
	for _, n := range []int{0, 3, 5, 16} {
		p.Extras = make([]byte, n)
		_, err := DecodeGetFlags(&p)
		wantField(t, "GAT flags", err, "extras")
	}
}

func TestDecodeMutationToken(t *testing.T) {
	p := Packet{OpCode: OpSet, Extras: mustHex(t, "00000000deadbeef"+"0000000000000102")}
	tok, ok, err := DecodeMutationToken(&p)
	if err != nil || !ok || tok.VbUUID != 0xdeadbeef || tok.Seqno != 0x102 {
		t.Fatalf("token %+v %v %v", tok, ok, err)
	}
	p.Extras = nil
	if _, ok, err := DecodeMutationToken(&p); ok || err != nil {
		t.Fatalf("no extras: %v %v", ok, err)
	}
	p.Extras = make([]byte, 8)
	_, _, err = DecodeMutationToken(&p)
	wantField(t, "8-byte token", err, "extras")
}

func TestDecodeCounterValue(t *testing.T) {
	p := Packet{OpCode: OpIncrement, Value: mustHex(t, "ffffffffffffffff")}
	if v, err := DecodeCounterValue(&p); err != nil || v != 1<<64-1 {
		t.Fatalf("value %d %v", v, err)
	}
	p.Value = []byte("17")
	_, err := DecodeCounterValue(&p)
	wantField(t, "2-byte counter", err, "value")
}

func TestDecodeHelloFeatures(t *testing.T) {
	f, err := DecodeHelloFeatures(mustHex(t, "0007001200ff"))
	if err != nil || len(f) != 3 || f[0] != FeatureXerror || f[1] != FeatureCollections || f[2] != 0xff {
		t.Fatalf("features %v %v", f, err)
	}
	if f, err := DecodeHelloFeatures(nil); err != nil || len(f) != 0 {
		t.Fatalf("empty: %v %v", f, err)
	}
	_, err = DecodeHelloFeatures([]byte{0, 7, 0})
	wantField(t, "odd HELLO value", err, "value")
}

func TestDecodeSASLMechanisms(t *testing.T) {
	m := DecodeSASLMechanisms([]byte(" SCRAM-SHA512  SCRAM-SHA256 PLAIN "))
	if len(m) != 3 || m[0] != MechScramSHA512 || m[2] != MechPlain {
		t.Fatalf("%q", m)
	}
	if len(DecodeSASLMechanisms(nil)) != 0 {
		t.Fatal("empty list")
	}
}

func TestDecodeCollectionsGetID(t *testing.T) {
	p := Packet{OpCode: OpCollectionsGetID, Extras: mustHex(t, "0000000000000012"+"00000008")}
	uid, cid, err := DecodeCollectionsGetID(&p)
	if err != nil || uid != 0x12 || cid != 8 {
		t.Fatalf("%d %d %v", uid, cid, err)
	}
	p.Extras = p.Extras[:8]
	_, _, err = DecodeCollectionsGetID(&p)
	wantField(t, "8-byte extras", err, "extras")
}

// TestDecodeClustermapNotification decodes hand-written server-initiated
// packets: magic 0x82, opcode 0x01, key = bucket, extras = 16 bytes (epoch,
// revision) or 4 (revision), value = the config (absent when brief).
func TestDecodeClustermapNotification(t *testing.T) {
	// 82 01 | key 7 | extras 16 | JSON | vbucket 0 | body 16+7+10 | opaque 0 | CAS 0
	b := append(mustHex(t, "820100071001000000000021000000000000000000000000"), mustHex(t,
		"0000000000000002"+ // epoch 2
			"000000000000abcd")...) // revision 0xabcd
	b = append(b, "default"...)
	b = append(b, `{"rev":1,"x":2}`[:10]...)
	p, err := decodeWhole(b)
	if err != nil {
		t.Fatal(err)
	}
	n, err := DecodeClustermapNotification(&p)
	if err != nil || string(n.Bucket) != "default" || !n.HasEpoch || n.Version.Epoch != 2 ||
		n.Version.Revision != 0xabcd || string(n.Config) != `{"rev":1,"` {
		t.Fatalf("%+v %v", n, err)
	}
	// Brief form, global config, epoch not yet set (-1).
	b = append(mustHex(t, "820100001000000000000010000000000000000000000000"), mustHex(t,
		"ffffffffffffffff"+"0000000000000009")...)
	p, err = decodeWhole(b)
	if err != nil {
		t.Fatal(err)
	}
	n, err = DecodeClustermapNotification(&p)
	if err != nil || len(n.Bucket) != 0 || n.Version.Epoch != -1 || n.Version.Revision != 9 || n.Config != nil {
		t.Fatalf("brief %+v %v", n, err)
	}
	// Old form: a 4-byte revision.
	p = Packet{Magic: MagicServerReq, ServerOpCode: ServerOpClustermapChangeNotification, Extras: mustHex(t, "00000100")}
	n, err = DecodeClustermapNotification(&p)
	if err != nil || n.HasEpoch || n.Version.Revision != 256 {
		t.Fatalf("4-byte form %+v %v", n, err)
	}
	p.Extras = make([]byte, 8)
	_, err = DecodeClustermapNotification(&p)
	wantField(t, "8-byte extras", err, "extras")
	p = Packet{Magic: MagicRes, OpCode: 0x01, Extras: make([]byte, 16)}
	_, err = DecodeClustermapNotification(&p)
	wantField(t, "a SET response", err, "magic/opcode")
}

func TestDecodeClusterConfigKnown(t *testing.T) {
	v, ok, err := DecodeClusterConfigKnown(mustHex(t, "0000000000000001"+"7fffffffffffffff"))
	if err != nil || !ok || v.Epoch != 1 || v.Revision != 1<<63-1 {
		t.Fatalf("%+v %v %v", v, ok, err)
	}
	if _, ok, err := DecodeClusterConfigKnown(nil); ok || err != nil {
		t.Fatal("no extras")
	}
	_, _, err = DecodeClusterConfigKnown(make([]byte, 8))
	wantField(t, "8 bytes", err, "extras")
}

func TestDecodeGetMeta(t *testing.T) {
	v2 := mustHex(t, "00000001"+"02000000"+"00001000"+"0000000000000042"+"03")
	m, err := DecodeGetMeta(&Packet{Extras: v2})
	if err != nil || !m.Deleted || m.Flags != 0x02000000 || m.Expiry != 0x1000 || m.Seqno != 0x42 || m.Datatype != DatatypeJSON|DatatypeSnappy {
		t.Fatalf("v2 %+v %v", m, err)
	}
	m, err = DecodeGetMeta(&Packet{Extras: v2[:20]})
	if err != nil || m.Datatype != 0 || m.Seqno != 0x42 {
		t.Fatalf("v1 %+v %v", m, err)
	}
	_, err = DecodeGetMeta(&Packet{Extras: v2[:19]})
	wantField(t, "19 bytes", err, "extras")
}

func TestDecodeObserveSeqno(t *testing.T) {
	f0 := mustHex(t, "00"+"0203"+"0000000000000abc"+"0000000000000010"+"0000000000000011")
	r, err := DecodeObserveSeqno(f0)
	if err != nil || r.DidFailover || r.Vbucket != 0x203 || r.VbUUID != 0xabc || r.PersistSeqno != 0x10 || r.CurrentSeqno != 0x11 {
		t.Fatalf("format 0 %+v %v", r, err)
	}
	f1 := append(mustHex(t, "01"), f0[1:]...)
	f1 = append(f1, mustHex(t, "0000000000000def"+"000000000000000f")...)
	r, err = DecodeObserveSeqno(f1)
	if err != nil || !r.DidFailover || r.OldVbUUID != 0xdef || r.LastReceivedSeqno != 0xf || r.CurrentSeqno != 0x11 {
		t.Fatalf("format 1 %+v %v", r, err)
	}
	_, err = DecodeObserveSeqno(f0[:26])
	wantField(t, "short", err, "value")
	_, err = DecodeObserveSeqno(f1[:30])
	wantField(t, "format 1 cut", err, "format")
	_, err = DecodeObserveSeqno(append([]byte{2}, f0[1:]...))
	wantField(t, "format 2", err, "format")
}

func TestDecodeObserve(t *testing.T) {
	v := mustHex(t, "0001"+"0002"+"6162"+"01"+"0000000000000007"+
		"0203"+"0001"+"63"+"80"+"0000000000000000")
	res, err := DecodeObserve(v)
	if err != nil || len(res) != 2 || res[0].Vbucket != 1 || string(res[0].Key) != "ab" || res[0].State != ObservePersisted ||
		res[0].Cas != 7 || res[1].Vbucket != 0x203 || string(res[1].Key) != "c" || res[1].State != ObserveNotFound {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = DecodeObserve(v[:3])
	wantField(t, "3 bytes", err, "entry")
	_, err = DecodeObserve(v[:len(v)-1])
	wantField(t, "cut CAS", err, "key length")
	if res, err := DecodeObserve(nil); err != nil || res != nil {
		t.Fatal("empty")
	}
}

func TestDecodeStat(t *testing.T) {
	k, v, done := DecodeStat(&Packet{Key: []byte("pid"), Value: []byte("3078")})
	if string(k) != "pid" || string(v) != "3078" || done {
		t.Fatal("stat")
	}
	if _, _, done := DecodeStat(&Packet{}); !done {
		t.Fatal("terminator")
	}
}

func TestIsJSONObject(t *testing.T) {
	for s, want := range map[string]bool{`{}`: true, ` {"a":1} `: true, `[]`: false, `{`: false, ``: false, `"{}"`: false} {
		if IsJSONObject([]byte(s)) != want {
			t.Errorf("IsJSONObject(%q) != %v", s, want)
		}
	}
}
