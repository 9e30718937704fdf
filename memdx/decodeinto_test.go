package memdx

import (
	"reflect"
	"testing"
)

// DecodePacketInto sets every field of a Packet that held another packet
// (a reader's one Packet reused): the result equals DecodePacket's, for a
// response and for a server request; on an error the Packet is unchanged.
func TestDecodePacketIntoOverwritesEveryField(t *testing.T) {
	res, err := AppendPacket(nil, &Packet{Magic: MagicRes, OpCode: OpGetQ, Status: StatusSuccess, Datatype: DatatypeJSON,
		Opaque: 7, Cas: 9, Extras: []byte{0, 0, 0, 1}, Value: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := AppendPacket(nil, &Packet{Magic: MagicServerReq, ServerOpCode: ServerOpCode(1), Opaque: 3, Value: []byte("cfg")})
	if err != nil {
		t.Fatal(err)
	}
	dirty := Packet{Magic: MagicReqExt, OpCode: OpSet, ServerOpCode: 5, Datatype: DatatypeSnappy, Vbucket: 99, Status: StatusKeyNotFound,
		Opaque: 1, Cas: 2, FramingExtras: []byte{1}, Extras: []byte{2}, Key: []byte("k"), Value: []byte("v")}
	for _, b := range [][]byte{res, srv} {
		want, wn, werr := DecodePacket(b, 0)
		p := dirty
		n, err := DecodePacketInto(&p, b, 0)
		if err != nil || werr != nil || n != wn || !reflect.DeepEqual(p, want) {
			t.Errorf("DecodePacketInto = %+v, %d, %v; DecodePacket = %+v, %d, %v", p, n, err, want, wn, werr)
		}
	}
	p := dirty
	if _, err := DecodePacketInto(&p, res[:len(res)-1], 0); err == nil || !reflect.DeepEqual(p, dirty) {
		t.Errorf("a short buffer: err %v, packet %+v changed", err, p)
	}
}
