package cluster

import "github.com/kvwire/kvwire/memdx"

// HelloFeatures are the HELLO features kvwire asks a Couchbase node for;
// MutationSeqno only with mutationTokens.
func HelloFeatures(mutationTokens bool) []memdx.HelloFeature {
	f := []memdx.HelloFeature{
		memdx.FeatureTCPNoDelay,
		memdx.FeatureXattr,
		memdx.FeatureXerror,
		memdx.FeatureSelectBucket,
		memdx.FeatureSnappy,
		memdx.FeatureJSON,
		memdx.FeatureDuplex,
		memdx.FeatureClustermapChangeNotificationBrief,
		memdx.FeatureUnorderedExecution,
		// Every response then carries the server's time on it
		// (memdx.Packet.ServerDuration), for tracing and reports.
		memdx.FeatureTracing,
		memdx.FeatureAltRequests,
		memdx.FeatureSyncReplication,
		memdx.FeatureCollections,
		memdx.FeaturePreserveTTL,
		memdx.FeatureGetClusterConfigWithKnownVersion,
		memdx.FeatureDedupeNotMyVbucketClustermap,
		// Informational (SDK RFC 0076): replica lookups are gated by the
		// bucket's subdoc.ReplicaRead capability, not by this feature.
		memdx.FeatureSubdocReplicaRead,
	}
	if mutationTokens {
		f = append(f, memdx.FeatureMutationSeqno)
	}
	return f
}
