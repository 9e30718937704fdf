// Package integration holds kvwire's tests against a real Couchbase Server.
// They are ordinary Go tests that skip unless KVWIRE_CONNSTR is set;
// `make integration` starts Couchbase Server in Docker (docker-compose.yml),
// creates the bucket, user and collection (scripts/couchbase-init.sh), sets
// the variables and runs them:
//
//	KVWIRE_CONNSTR   couchbase://127.0.0.1/default
//	KVWIRE_USERNAME  the RBAC user (bucket_full_access on the bucket)
//	KVWIRE_PASSWORD  its password
package integration
