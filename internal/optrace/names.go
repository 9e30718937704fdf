package optrace

import (
	"strings"

	"github.com/kvwire/kvwire/memdx"
)

// opNames are RFC 0067's names of the client's operations; a Trace
// holds its operation's index here (opUnlisted for a name not listed), by
// which the operation's metric recorder is found without hashing.
var opNames = [...]string{
	"get", "get_and_touch", "get_and_lock", "get_replica", "unlock", "touch", "exists",
	"upsert", "insert", "replace", "remove", "append", "prepend", "increment", "decrement",
	"lookup_in", "lookup_in_replica", "mutate_in", "ping", "stats", "version", "flush",
	"range_scan_create", "range_scan_continue", "range_scan_cancel", "scan",
}

const opUnlisted = -1

// opIndex is the index in opNames of the client's operation name (with
// its opcode where one name covers several requests), opUnlisted for one
// not listed.
func opIndex(name string, opc memdx.OpCode) int {
	switch name {
	case "Get", "GetReplica(active)":
		return 0
	case "GetAndTouch":
		return 1
	case "GetAndLock":
		return 2
	case "GetReplica":
		return 3
	case "Unlock":
		return 4
	case "Touch":
		return 5
	case "Exists":
		return 6
	case "Upsert":
		return 7
	case "Insert":
		return 8
	case "Replace":
		return 9
	case "Remove":
		return 10
	case "Append":
		return 11
	case "Prepend":
		return 12
	case "Increment":
		return 13
	case "Decrement":
		return 14
	case "LookupIn", "LookupInReplica(active)":
		return 15
	case "LookupInReplica":
		return 16
	case "MutateIn":
		return 17
	case "Ping":
		return 18
	case "Stats":
		return 19
	case "Version":
		return 20
	case "Flush":
		return 21
	case "Scan":
		switch opc {
		case memdx.OpRangeScanCreate:
			return 22
		case memdx.OpRangeScanContinue:
			return 23
		case memdx.OpRangeScanCancel:
			return 24
		}
		return 25
	}
	return opUnlisted
}

// Name is an operation's RFC 0067 name (Span: "get_and_lock") and its
// index in opNames, as NameOf finds them for the client's name of it; the
// client keeps it for the operations of a name, so that it is found once
// rather than per operation.
type Name struct {
	Span string
	op   int
}

// NameOf is the Name of the client's operation name with opcode opc.
func NameOf(name string, opc memdx.OpCode) Name {
	span, op := SpanName(name, opc)
	return Name{Span: span, op: op}
}

// SpanName is RFC 0067's name of the client's operation name, and its
// index in opNames.
func SpanName(name string, opc memdx.OpCode) (string, int) {
	if i := opIndex(name, opc); i != opUnlisted {
		return opNames[i], i
	}
	return snakeCase(name), opUnlisted
}

// snakeCase turns "GetAndLock" into "get_and_lock", for names SpanName
// does not list.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// OpcodeSpanName names an operation a connection knows only by its
// opcode (a request sent without an Origin).
func OpcodeSpanName(op memdx.OpCode) string {
	switch op {
	case memdx.OpNoop:
		return "ping"
	case memdx.OpGet:
		return "get"
	case memdx.OpGetClusterConfig:
		return "get_cluster_config"
	case memdx.OpCollectionsGetID:
		return "get_collection_id"
	}
	return op.String()
}
