// Package example holds the test of README.md's OpenTelemetry example: the
// program that exports kvwire's spans and metrics over OTLP/HTTP through
// kvotel. It is a module of its own so that the OTLP exporters (and the
// gRPC and protobuf modules they bring) are neither kvwire's dependencies
// nor kvotel's: only this test needs them.
//
// The test builds README.md's program as written and runs it against the
// mock cluster (mockcluster), with OTEL_EXPORTER_OTLP_ENDPOINT pointing at
// an OTLP/HTTP collector of its own, and checks what the collector
// received: the operations' spans and their latency metric.
package example
