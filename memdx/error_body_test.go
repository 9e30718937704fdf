package memdx

import "testing"

// An UNKNOWN_COLLECTION body names the manifest uid the server decided by
// at its root, in hex; it is read in the same pass as the error context.
func TestDecodeErrorBodyManifestUID(t *testing.T) {
	b, ok := DecodeErrorBody(DatatypeJSON, []byte(`{"error":{"context":"x"},"manifest_uid":"1f"}`))
	if !ok || !b.HasManifest || b.ManifestUID != 0x1f {
		t.Errorf("got %x %v, want 1f true", b.ManifestUID, b.HasManifest)
	}
	if !b.HasContext || b.Context != "x" {
		t.Errorf("context %+v, want x", b.ErrorContext)
	}
	for _, body := range []string{``, `{}`, `{"manifest_uid":"zz"}`, `not json`} {
		if b, _ := DecodeErrorBody(DatatypeJSON, []byte(body)); b.HasManifest {
			t.Errorf("%q: a uid read", body)
		}
	}
	if _, ok := DecodeErrorBody(DatatypeJSON|DatatypeSnappy, []byte(`{"manifest_uid":"1f"}`)); ok {
		t.Error("a snappy-compressed body was read")
	}
}
