package memdx

import "fmt"

// HelloFeature is a feature a client asks for in HELLO and the server echoes
// when it grants it. Numbers from kv_engine's include/mcbp/protocol/feature.h.
type HelloFeature uint16

// HELLO features: every value kv_engine's feature.h defines.
const (
	// FeatureDatatype (0x01) is retired; servers ignore it.
	FeatureDatatype      HelloFeature = 0x01
	FeatureTLS           HelloFeature = 0x02
	FeatureTCPNoDelay    HelloFeature = 0x03
	FeatureMutationSeqno HelloFeature = 0x04
	FeatureTCPDelay      HelloFeature = 0x05
	FeatureXattr         HelloFeature = 0x06
	FeatureXerror        HelloFeature = 0x07
	FeatureSelectBucket  HelloFeature = 0x08
	// FeatureInvalid2 (0x09) used to be collections; servers ignore it.
	FeatureInvalid2                     HelloFeature = 0x09
	FeatureSnappy                       HelloFeature = 0x0a
	FeatureJSON                         HelloFeature = 0x0b
	FeatureDuplex                       HelloFeature = 0x0c
	FeatureClustermapChangeNotification HelloFeature = 0x0d
	FeatureUnorderedExecution           HelloFeature = 0x0e
	FeatureTracing                      HelloFeature = 0x0f
	FeatureAltRequests                  HelloFeature = 0x10
	FeatureSyncReplication              HelloFeature = 0x11
	FeatureCollections                  HelloFeature = 0x12
	FeatureSnappyEverywhere             HelloFeature = 0x13
	FeaturePreserveTTL                  HelloFeature = 0x14
	FeatureVAttr                        HelloFeature = 0x15
	// FeaturePiTR (0x16) is retired (kv_engine now calls it Invalid3);
	// servers ignore it.
	FeaturePiTR                       HelloFeature = 0x16
	FeatureSubdocCreateAsDeleted      HelloFeature = 0x17
	FeatureSubdocDocumentMacroSupport HelloFeature = 0x18
	FeatureSubdocReplaceBodyWithXattr HelloFeature = 0x19
	FeatureReportUnitUsage            HelloFeature = 0x1a
	FeatureNonBlockingThrottlingMode  HelloFeature = 0x1b
	FeatureSubdocReplicaRead          HelloFeature = 0x1c
	// FeatureGetClusterConfigWithKnownVersion is informational: the server
	// accepts the epoch/revision extras on GET_CLUSTER_CONFIG.
	FeatureGetClusterConfigWithKnownVersion HelloFeature = 0x1d
	// FeatureDedupeNotMyVbucketClustermap tells the server the client copes
	// with a NOT_MY_VBUCKET without a config body when it knows the config.
	FeatureDedupeNotMyVbucketClustermap HelloFeature = 0x1e
	// FeatureClustermapChangeNotificationBrief asks for version-only
	// cluster-map change notifications.
	FeatureClustermapChangeNotificationBrief     HelloFeature = 0x1f
	FeatureSubdocAllowsAccessOnMultipleXattrKeys HelloFeature = 0x20
	FeatureSubdocBinaryXattr                     HelloFeature = 0x21
	FeatureRangeScanIncludeXattr                 HelloFeature = 0x22
	FeatureSubdocAllowReplicaReadOnDeletedDocs   HelloFeature = 0x23
	FeatureGetRandomKeyIncludeXattr              HelloFeature = 0x24
)

var featureNames = map[HelloFeature]string{
	FeatureDatatype: "Datatype(retired)", FeatureTLS: "TLS", FeatureTCPNoDelay: "TCPNODELAY",
	FeatureMutationSeqno: "MutationSeqno", FeatureTCPDelay: "TCPDELAY", FeatureXattr: "XATTR",
	FeatureXerror: "XERROR", FeatureSelectBucket: "SelectBucket", FeatureInvalid2: "Invalid2",
	FeatureSnappy: "Snappy", FeatureJSON: "JSON", FeatureDuplex: "Duplex",
	FeatureClustermapChangeNotification: "ClustermapChangeNotification",
	FeatureUnorderedExecution:           "UnorderedExecution", FeatureTracing: "Tracing",
	FeatureAltRequests: "AltRequestSupport", FeatureSyncReplication: "SyncReplication",
	FeatureCollections: "Collections", FeatureSnappyEverywhere: "SnappyEverywhere",
	FeaturePreserveTTL: "PreserveTtl", FeatureVAttr: "VAttr", FeaturePiTR: "PiTR(retired)",
	FeatureSubdocCreateAsDeleted:                 "SubdocCreateAsDeleted",
	FeatureSubdocDocumentMacroSupport:            "SubdocDocumentMacroSupport",
	FeatureSubdocReplaceBodyWithXattr:            "SubdocReplaceBodyWithXattr",
	FeatureReportUnitUsage:                       "ReportUnitUsage",
	FeatureNonBlockingThrottlingMode:             "NonBlockingThrottlingMode",
	FeatureSubdocReplicaRead:                     "SubdocReplicaRead",
	FeatureGetClusterConfigWithKnownVersion:      "GetClusterConfigWithKnownVersion",
	FeatureDedupeNotMyVbucketClustermap:          "DedupeNotMyVbucketClustermap",
	FeatureClustermapChangeNotificationBrief:     "ClustermapChangeNotificationBrief",
	FeatureSubdocAllowsAccessOnMultipleXattrKeys: "SubdocAllowsAccessOnMultipleXattrKeys",
	FeatureSubdocBinaryXattr:                     "SubdocBinaryXattr",
	FeatureRangeScanIncludeXattr:                 "RangeScanIncludeXattr",
	FeatureSubdocAllowReplicaReadOnDeletedDocs:   "SubdocAllowReplicaReadOnDeletedDocs",
	FeatureGetRandomKeyIncludeXattr:              "GetRandomKeyIncludeXattr",
}

func (f HelloFeature) String() string {
	if n, ok := featureNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Feature(0x%04x)", uint16(f))
}

// Datatype is the datatype byte of a packet: a set of bits describing the
// value.
type Datatype uint8

// Datatype bits.
const (
	DatatypeRaw    Datatype = 0x00
	DatatypeJSON   Datatype = 0x01
	DatatypeSnappy Datatype = 0x02
	DatatypeXattr  Datatype = 0x04
)

// Has reports whether all bits of b are set in d.
func (d Datatype) Has(b Datatype) bool { return d&b == b }

// Valid reports whether d sets only defined bits.
func (d Datatype) Valid() bool { return d&^(DatatypeJSON|DatatypeSnappy|DatatypeXattr) == 0 }

func (d Datatype) String() string {
	if d == 0 {
		return "raw"
	}
	s := ""
	add := func(n string) {
		if s != "" {
			s += "|"
		}
		s += n
	}
	if d.Has(DatatypeJSON) {
		add("json")
	}
	if d.Has(DatatypeSnappy) {
		add("snappy")
	}
	if d.Has(DatatypeXattr) {
		add("xattr")
	}
	if rest := d &^ (DatatypeJSON | DatatypeSnappy | DatatypeXattr); rest != 0 {
		add(fmt.Sprintf("0x%02x", uint8(rest)))
	}
	return s
}
