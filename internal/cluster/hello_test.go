package cluster

import (
	"slices"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

func TestHelloFeaturesMutationTokens(t *testing.T) {
	with, without := HelloFeatures(true), HelloFeatures(false)
	if !slices.Contains(with, memdx.FeatureMutationSeqno) || slices.Contains(without, memdx.FeatureMutationSeqno) {
		t.Fatalf("MutationSeqno: asked with tokens %v, without %v", with, without)
	}
	for _, f := range []memdx.HelloFeature{memdx.FeatureSelectBucket, memdx.FeatureCollections, memdx.FeatureXerror} {
		if !slices.Contains(without, f) {
			t.Errorf("%v not asked", f)
		}
	}
}
