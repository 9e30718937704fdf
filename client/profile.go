package client

import (
	"fmt"
	"time"
)

// ConfigProfile names a set of defaults for Options, as Couchbase SDKs'
// configuration profiles do: Options.Profile, or profile=NAME in the
// connection string. A profile fills only what is left unset: a field set
// in Options, or an option in the connection string (kv_timeout=...),
// wins over it.
type ConfigProfile string

// ProfileWANDevelopment is for a client far from its cluster, such as a
// laptop working against Couchbase Capella over the internet: the KV and
// connect timeouts are 20 s instead of 2.5 s and 10 s. These are the values
// of gocb's wan-development profile (gocb v2 config_profile.go,
// developmentProfile: KVTimeout, KVDurableTimeout and ConnectTimeout 20 s)
// and of the C++ SDK core's wan_development (couchbase-cxx-client
// core/config_profiles.cxx, development_profile: key_value_timeout,
// key_value_durable_timeout and connect_timeout 20 s); kvwire's KVTimeout
// bounds durable writes too. Their other timeouts are for services kvwire
// does not speak (query, search, views, analytics, management, DNS SRV).
// kvwire's own health check keeps its defaults (HealthCheckOptions).
const ProfileWANDevelopment ConfigProfile = "wan_development"

// Defaults returns the Options fields the profile sets, the others zero.
// An unknown profile is ErrInvalidArgument.
func (p ConfigProfile) Defaults() (Options, error) {
	switch p {
	case ProfileWANDevelopment:
		return Options{KVTimeout: 20 * time.Second, ConnectTimeout: 20 * time.Second}, nil
	}
	return Options{}, fmt.Errorf("%w: unknown configuration profile %q (known: %s)", ErrInvalidArgument, string(p), ProfileWANDevelopment)
}
