//go:build readme

package example

// The packages README.md's OpenTelemetry program imports, so that this
// module requires them (the program is built from README.md by the test;
// the readme tag keeps these imports out of every build).
import (
	_ "github.com/kvwire/kvwire/client"
	_ "github.com/kvwire/kvwire/kvotel"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "go.opentelemetry.io/otel/sdk/trace"
)
