package conformance

import (
	"os"
	"path/filepath"
	"testing"
)

// A skip for a missing corpus, and a fuzz target left without its seeds,
// are each a line of the file KVWIRE_CONFORMANCE_SKIPS names, for
// scripts/test.sh to count.
func TestMissingCorpusIsRecorded(t *testing.T) {
	t.Setenv(EnvRequire, "")
	out := filepath.Join(t.TempDir(), "skips")
	t.Setenv(EnvSkips, out)
	old := Dir
	Dir = filepath.Join(t.TempDir(), "no-corpus")
	t.Cleanup(func() { Dir = old })

	ran := false
	t.Run("reads", func(t *testing.T) {
		Read(t, "configs/x.json")
		ran = true
	})
	if ran {
		t.Fatal("Read went on without the corpus")
	}
	if seeds := Seeds(t, "packets/*.hex"); seeds != nil {
		t.Fatalf("seeds %v without a corpus", seeds)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "skip\tconformance\t" + t.Name() + "/reads\t" + filepath.Join(Dir, "configs", "x.json") + "\n" +
		"seeds\tconformance\t" + t.Name() + "\t" + filepath.Join(Dir, "packets", "*.hex") + "\n"
	if string(b) != want {
		t.Fatalf("recorded %q, want %q", b, want)
	}

	// Without the variable nothing is written anywhere.
	t.Setenv(EnvSkips, "")
	t.Run("unrecorded", func(t *testing.T) { Read(t, "configs/x.json") })
	if b2, _ := os.ReadFile(out); string(b2) != string(b) {
		t.Fatalf("the file changed to %q", b2)
	}
}
