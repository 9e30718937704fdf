package client

// The messages the reports are logged with, each with one attribute,
// "report", holding the report's JSON (a JSON handler embeds it as an
// object, a text handler prints it as one line of JSON). A program that
// wants the reports themselves (kvcli bench prints them) can pick them out
// of its Logger's records by these.
const (
	ThresholdReportMessage = "kvwire: operations over threshold"
	OrphanReportMessage    = "kvwire: orphan responses observed"
	LoggingMeterMessage    = "kvwire: operation latencies"
	// ReportAttribute is the key of the attribute holding a report.
	ReportAttribute = "report"
)
