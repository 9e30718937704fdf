module github.com/kvwire/kvwire/reftest

go 1.25.0

require (
	github.com/bradfitz/gomemcache v0.0.0-20260422231931-4d751bb6e37c
	github.com/couchbase/gocbcore/v10 v10.8.1
	github.com/kvwire/kvwire v0.0.0-00010101000000-000000000000
)

require (
	github.com/golang/snappy v1.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	golang.org/x/sync v0.20.0 // indirect
)

replace github.com/kvwire/kvwire => ../
