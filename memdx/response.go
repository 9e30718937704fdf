package memdx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kvwire/kvwire/internal/kverr"
)

// Response decoders read the op-specific parts of a decoded response Packet.
// They check lengths and return a *DecodeError naming the field that was
// wrong; returned slices alias the packet.

// DecodeGetFlags reads the 4-byte flags extras of a successful GET, GETK,
// GAT, GET_LOCKED or GET_REPLICA response.
func DecodeGetFlags(p *Packet) (uint32, error) {
	if len(p.Extras) != 4 {
		return 0, malformed(p.OpCode.String()+" response", "extras", "%d bytes, want 4 (flags)", len(p.Extras))
	}
	return binary.BigEndian.Uint32(p.Extras), nil
}

// CopyGetValue decodes a successful get's flags, datatype (without
// Snappy) and value, and copies the value, inflated when compressed: the
// one copy its reader owns. The copy goes into into when it has room (a
// block the caller carves values from), else into a slice of its own,
// never nil (an empty value is a value).
func CopyGetValue(p *Packet, into []byte) (value []byte, flags uint32, dt Datatype, err error) {
	flags, err = DecodeGetFlags(p)
	if err != nil {
		return nil, 0, 0, err
	}
	dt = p.Datatype &^ DatatypeSnappy
	if p.Datatype.Has(DatatypeSnappy) {
		value, err = DecompressSnappy(nil, p.Value, 0)
		if err != nil {
			return nil, 0, 0, err
		}
		return value, flags, dt, nil
	}
	if into == nil || cap(into) < len(p.Value) {
		into = make([]byte, 0, len(p.Value)) // make allocates nothing for 0 bytes
	}
	return append(into[:0], p.Value...), flags, dt, nil
}

// ForeignKey is the error of a GETK or GETKQ answer p that names another
// key than want, its request's: the server mixed up its answers. It
// matches kverr.ErrProtocol, on which conn closes the connection (the
// request then ends with the connection's error, and a read is retried).
func ForeignKey(p *Packet, want string) error {
	return fmt.Errorf("a %s answer names key %q, not its request's %q: %w", p.OpCode, p.Key, want, kverr.ErrProtocol)
}

// MutationToken identifies a mutation: the vbucket's UUID and the sequence
// number the mutation got. Servers send it when MutationSeqno is negotiated.
type MutationToken struct {
	VbUUID uint64
	Seqno  uint64
}

// DecodeMutationToken reads the 16-byte extras of a successful mutation
// response. It reports false when there are no extras (MutationSeqno not
// negotiated).
func DecodeMutationToken(p *Packet) (MutationToken, bool, error) {
	switch len(p.Extras) {
	case 0:
		return MutationToken{}, false, nil
	case 16:
		return MutationToken{
			VbUUID: binary.BigEndian.Uint64(p.Extras[0:8]),
			Seqno:  binary.BigEndian.Uint64(p.Extras[8:16]),
		}, true, nil
	}
	return MutationToken{}, false, malformed(p.OpCode.String()+" response", "extras",
		"%d bytes, want 0 or 16 (vbucket uuid, seqno)", len(p.Extras))
}

// DecodeCounterValue reads the 8-byte value of a successful INCREMENT or
// DECREMENT response.
func DecodeCounterValue(p *Packet) (uint64, error) {
	if len(p.Value) != 8 {
		return 0, malformed(p.OpCode.String()+" response", "value", "%d bytes, want 8", len(p.Value))
	}
	return binary.BigEndian.Uint64(p.Value), nil
}

// DecodeHelloFeatures reads the features a server granted in its HELLO
// response.
func DecodeHelloFeatures(value []byte) ([]HelloFeature, error) {
	if len(value)%2 != 0 {
		return nil, malformed("HELLO response", "value", "%d bytes is not a list of 2-byte features", len(value))
	}
	out := make([]HelloFeature, 0, len(value)/2)
	for i := 0; i < len(value); i += 2 {
		out = append(out, HelloFeature(binary.BigEndian.Uint16(value[i:])))
	}
	return out, nil
}

// DecodeSASLMechanisms splits a SASL_LIST_MECHS response value
// ("SCRAM-SHA512 SCRAM-SHA256 PLAIN") into mechanism names.
func DecodeSASLMechanisms(value []byte) []string {
	return strings.Fields(string(value))
}

// DecodeCollectionsGetID reads a COLLECTIONS_GET_ID response's 12-byte
// extras: the manifest uid and the collection id.
func DecodeCollectionsGetID(p *Packet) (manifestUID uint64, collectionID uint32, err error) {
	if len(p.Extras) != 12 {
		return 0, 0, malformed("COLLECTIONS_GET_ID response", "extras", "%d bytes, want 12", len(p.Extras))
	}
	return binary.BigEndian.Uint64(p.Extras[0:8]), binary.BigEndian.Uint32(p.Extras[8:12]), nil
}

// ClusterConfigVersion is the version of a cluster config: configs compare by
// epoch, then revision. An epoch of -1 (or a missing one) means not yet set.
type ClusterConfigVersion struct {
	Epoch    int64
	Revision int64
}

// ClustermapNotification is a decoded CLUSTERMAP_CHANGE_NOTIFICATION.
type ClustermapNotification struct {
	// Bucket is the bucket the config is for; empty for the global config.
	Bucket  []byte
	Version ClusterConfigVersion
	// HasEpoch is false for the old 4-byte form, which carries no epoch.
	HasEpoch bool
	// Config is the full config JSON; empty for a brief notification.
	Config []byte
}

// DecodeClustermapNotification reads a server-initiated cluster-map change
// notification: extras of 4 bytes (revision) or 16 (epoch, revision), the
// bucket in the key, the config (if any) in the value.
func DecodeClustermapNotification(p *Packet) (ClustermapNotification, error) {
	var n ClustermapNotification
	if p.Magic != MagicServerReq || p.ServerOpCode != ServerOpClustermapChangeNotification {
		return n, malformed("cluster-map notification", "magic/opcode",
			"%s %s is not a cluster-map change notification", p.Magic, p.ServerOpCode)
	}
	switch len(p.Extras) {
	case 4:
		n.Version.Revision = int64(binary.BigEndian.Uint32(p.Extras))
	case 16:
		n.Version.Epoch = int64(binary.BigEndian.Uint64(p.Extras[0:8]))
		n.Version.Revision = int64(binary.BigEndian.Uint64(p.Extras[8:16]))
		n.HasEpoch = true
	default:
		return n, malformed("cluster-map notification", "extras", "%d bytes, want 4 or 16", len(p.Extras))
	}
	n.Bucket = p.Key
	n.Config = p.Value
	return n, nil
}

// DecodeClusterConfigKnown reads the 16-byte extras of a GET_CLUSTER_CONFIG
// request (the version the client knows). It reports false when there are no
// extras.
func DecodeClusterConfigKnown(extras []byte) (ClusterConfigVersion, bool, error) {
	switch len(extras) {
	case 0:
		return ClusterConfigVersion{}, false, nil
	case 16:
		return ClusterConfigVersion{
			Epoch:    int64(binary.BigEndian.Uint64(extras[0:8])),
			Revision: int64(binary.BigEndian.Uint64(extras[8:16])),
		}, true, nil
	}
	return ClusterConfigVersion{}, false, malformed("GET_CLUSTER_CONFIG request", "extras",
		"%d bytes, want 0 or 16", len(extras))
}

// GetMeta is a decoded GET_META response.
type GetMeta struct {
	Deleted  bool
	Flags    uint32
	Expiry   uint32
	Seqno    uint64
	Datatype Datatype // only from a version-2 response
}

// DecodeGetMeta reads a GET_META response's extras: deleted (4), flags (4),
// expiry (4), seqno (8) and, for version 2, datatype (1).
func DecodeGetMeta(p *Packet) (GetMeta, error) {
	var m GetMeta
	if len(p.Extras) != 20 && len(p.Extras) != 21 {
		return m, malformed("GET_META response", "extras", "%d bytes, want 20 or 21", len(p.Extras))
	}
	m.Deleted = binary.BigEndian.Uint32(p.Extras[0:4]) != 0
	m.Flags = binary.BigEndian.Uint32(p.Extras[4:8])
	m.Expiry = binary.BigEndian.Uint32(p.Extras[8:12])
	m.Seqno = binary.BigEndian.Uint64(p.Extras[12:20])
	if len(p.Extras) == 21 {
		m.Datatype = Datatype(p.Extras[20])
	}
	return m, nil
}

// ObserveSeqnoResult is a decoded OBSERVE_SEQNO response.
type ObserveSeqnoResult struct {
	// DidFailover is true for the format-1 response, sent when the vbucket
	// UUID the client gave is no longer the current one.
	DidFailover       bool
	Vbucket           uint16
	VbUUID            uint64
	PersistSeqno      uint64
	CurrentSeqno      uint64
	OldVbUUID         uint64
	LastReceivedSeqno uint64
}

// DecodeObserveSeqno reads an OBSERVE_SEQNO response value: format (1),
// vbucket (2), vbuuid (8), persisted and current seqno (8 each) and, for
// format 1, the old vbuuid and last received seqno (8 each).
func DecodeObserveSeqno(value []byte) (ObserveSeqnoResult, error) {
	var r ObserveSeqnoResult
	if len(value) < 27 {
		return r, malformed("OBSERVE_SEQNO response", "value", "%d bytes, want at least 27", len(value))
	}
	format := value[0]
	switch {
	case format == 0 && len(value) == 27:
	case format == 1 && len(value) == 43:
		r.DidFailover = true
		r.OldVbUUID = binary.BigEndian.Uint64(value[27:35])
		r.LastReceivedSeqno = binary.BigEndian.Uint64(value[35:43])
	default:
		return r, malformed("OBSERVE_SEQNO response", "format", "format %d with %d bytes", format, len(value))
	}
	r.Vbucket = binary.BigEndian.Uint16(value[1:3])
	r.VbUUID = binary.BigEndian.Uint64(value[3:11])
	r.PersistSeqno = binary.BigEndian.Uint64(value[11:19])
	r.CurrentSeqno = binary.BigEndian.Uint64(value[19:27])
	return r, nil
}

// ObserveState is the state of one key in an OBSERVE response.
type ObserveState uint8

// Observe states.
const (
	ObserveNotPersisted   ObserveState = 0x00
	ObservePersisted      ObserveState = 0x01
	ObserveNotFound       ObserveState = 0x80
	ObserveLogicalDeleted ObserveState = 0x81
)

// ObserveResult is one key of an OBSERVE response.
type ObserveResult struct {
	Vbucket uint16
	Key     []byte
	State   ObserveState
	Cas     uint64
}

// DecodeObserve reads an OBSERVE response value: for each key, vbucket (2),
// key length (2), key, state (1), CAS (8).
func DecodeObserve(value []byte) ([]ObserveResult, error) {
	var out []ObserveResult
	for len(value) > 0 {
		if len(value) < 4 {
			return nil, malformed("OBSERVE response", "entry", "%d trailing bytes", len(value))
		}
		vb := binary.BigEndian.Uint16(value[0:2])
		kl := int(binary.BigEndian.Uint16(value[2:4]))
		if len(value) < 4+kl+9 {
			return nil, malformed("OBSERVE response", "key length", "%d does not fit in the %d bytes left", kl, len(value)-4)
		}
		out = append(out, ObserveResult{
			Vbucket: vb,
			Key:     value[4 : 4+kl],
			State:   ObserveState(value[4+kl]),
			Cas:     binary.BigEndian.Uint64(value[5+kl : 13+kl]),
		})
		value = value[13+kl:]
	}
	return out, nil
}

// DecodeStat reads one STAT response: key and value. The final response of a
// STAT exchange has an empty key; done reports it.
func DecodeStat(p *Packet) (key, value []byte, done bool) {
	return p.Key, p.Value, len(p.Key) == 0
}

// IsJSONObject reports whether b looks like a JSON object (for choosing the
// JSON datatype bit); it does not validate.
func IsJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}'
}
