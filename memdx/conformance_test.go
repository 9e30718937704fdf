package memdx

import (
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/kvwire/kvwire/internal/conformance"
)

// readConformance reads a file of the shared conformance corpus, read in
// place (never copied into the repository), skipping the test with the path
// when the corpus is absent (failing under KVWIRE_REQUIRE_CONFORMANCE=1).
func readConformance(t testing.TB, rel string) []byte {
	t.Helper()
	return conformance.Read(t, rel)
}

// conformancePackets is the decoded shape of the two packet files.
type docPacket struct {
	Line             int     `json:"line"`
	Section          string  `json:"section"`
	Direction        string  `json:"direction"`
	Magic            string  `json:"magic"`
	Opcode           string  `json:"opcode"`
	Status           *string `json:"status"`
	Length           int     `json:"length"`
	HeaderTotalBody  uint32  `json:"header_total_body"`
	HeaderConsistent bool    `json:"header_consistent"`
	Hex              string  `json:"hex"`
}

type jvmPacket struct {
	File             string `json:"file"`
	Index            int    `json:"packet_index_in_file"`
	Length           int    `json:"length"`
	Magic            string `json:"magic"`
	Opcode           string `json:"opcode"`
	FramingExtrasLen int    `json:"framing_extras_len"`
	KeyLen           int    `json:"key_len"`
	ExtrasLen        int    `json:"extras_len"`
	Datatype         string `json:"datatype"`
	StatusOrVbucket  string `json:"status_or_vbucket"`
	Opaque           uint32 `json:"opaque"`
	CasHex           string `json:"cas_hex"`
	HeaderTotalBody  uint32 `json:"header_total_body"`
	Complete         bool   `json:"complete"`
	Hex              string `json:"hex"`
}

func loadDocPackets(t testing.TB) []docPacket {
	var f struct {
		Packets []docPacket `json:"packets"`
	}
	if err := json.Unmarshal(readConformance(t, "packets/kv_engine_doc_packet_examples.json"), &f); err != nil {
		t.Fatal(err)
	}
	return f.Packets
}

func loadJVMPackets(t testing.TB) []jvmPacket {
	var f struct {
		Packets []jvmPacket `json:"packets"`
	}
	if err := json.Unmarshal(readConformance(t, "packets/jvm_core_io_packets.json"), &f); err != nil {
		t.Fatal(err)
	}
	return f.Packets
}

// conformanceSeeds returns the raw bytes of every conformance packet, or nil
// when the corpus is absent (fuzz targets seed from it when it is there;
// under KVWIRE_REQUIRE_CONFORMANCE=1 its absence fails tb).
func conformanceSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, b := range conformance.Seeds(tb, "packets/kv_engine_doc_packet_examples.json") {
		var f struct {
			Packets []docPacket `json:"packets"`
		}
		if json.Unmarshal(b, &f) == nil {
			for _, p := range f.Packets {
				if raw, err := hex.DecodeString(p.Hex); err == nil {
					out = append(out, raw)
				}
			}
		}
	}
	for _, b := range conformance.Seeds(tb, "packets/jvm_core_io_packets.json") {
		var f struct {
			Packets []jvmPacket `json:"packets"`
		}
		if json.Unmarshal(b, &f) == nil {
			for _, p := range f.Packets {
				if raw, err := hex.DecodeString(p.Hex); err == nil {
					out = append(out, raw)
				}
			}
		}
	}
	return out
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
