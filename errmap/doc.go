// Package errmap is the KV error map of RFC 0013 (and kv_engine's
// docs/ErrorMap.md): a JSON document in which a Couchbase node describes the
// status codes it may send, so that a client can act sensibly on a status it
// was not built to know.
//
// # Using a map
//
// A connection that negotiated HELLO feature XERROR sends GET_ERROR_MAP
// asking for MaxVersion (memdx.NewGetErrorMap(errmap.MaxVersion)); the server
// answers with that version or a lower one. Parse decodes the answer into an
// immutable *Map, which the client keeps per node (nodes of different
// versions have different maps): each connection asks for the map once, at
// bootstrap, and keeps it for its life.
//
// The client is the authority on every status it gives an outcome of its
// own (not found, exists, CAS mismatch, locked, ...): it consults the map
// (Map.Lookup) for the others, codes memdx has no name for and named ones the
// client has nothing particular to do with (EBUSY, ENOMEM, EWOULD_THROTTLE,
// the rate limits, ...), as RFC 0049 says for "KV errors it does not know
// anything about". Entry.RetryIndicated
// says whether such a status goes to the retry orchestrator (RFC 0049,
// reason KV_ERROR_MAP_RETRY_INDICATED) or fails the operation at once; the
// entry's name and description go into the error the user sees.
//
// # Attributes
//
// Attr has a constant for every attribute kv_engine documents (19, including
// v2's rate-limit and system-constraint, and no-retry) plus RFC 0013's
// auto-retry. Attrs is their set. An attribute name Parse does not know is
// dropped and the entry keeps the attributes it does know, in both format
// versions: version 2 requires this, and for version 1 RFC 0013 says "in any
// case, the unknown attribute should be ignored". Refusing a whole v1 map
// for one stray name would throw away what it says about every other code;
// ignoring the name leaves the client acting only on attributes it
// understands, which is all it can do with a v2 map too. A status whose entry
// has no known retry attribute is not retried, so an unknown name never makes
// the client retry. Duplicate names in one attrs array are harmless and
// accepted.
//
// Parse accepts an attribute a version does not define (rate-limit in a v1
// map, say) as the attribute it is: its meaning does not depend on the
// version.
//
// # Retry specs
//
// An entry may carry a "retry" object (RetrySpec): a strategy (constant,
// linear or exponential) and millisecond values after, interval, ceil and
// max-duration. RetrySpec.Delay gives the wait before retry n: After for
// the first, then Interval (constant), min(Interval*r, Ceil) (linear) or
// min(Interval^r, Ceil) (exponential) where r = n-1 is the number of retries
// already made and Ceil 0 means no cap. For CouchbaseMock's exponential spec
// (after 50, interval 2, ceil 200) the waits are 50, 2, 4, 8, 16, 32, 64,
// 128, 200, 200, ... ms. RetrySpec.Deadline bounds the sequence by
// max-duration, measured from the first failure and After included. Delay's
// doc says where RFC 0013's pseudo-code and prose disagree and which this
// follows. RFC 0069 and RFC 0049 tell SDKs to prefer the user's retry
// strategy to these values; whether to use them is the retry layer's choice.
//
// # What Parse rejects
//
// A map that is not exactly a v1 or v2 error map is corrupt: RFC 0013 says to
// ignore it and go on without XERROR. Parse returns a *ParseError naming the
// entry key and field at fault (errors.Is(err, ErrCorrupt)) for:
//   - input that is not one JSON object (syntax errors, truncation, anything
//     after the object);
//   - a missing version, revision or errors; a field of the wrong JSON type
//     at any level (errors not an object, an entry not an object, name or
//     desc not a string, attrs not an array of strings, retry not an object,
//     numbers that are strings, null anywhere a value is expected);
//   - a version that is 0, negative or above MaxVersion. The server never
//     answers above the version asked for, so a higher one means the format
//     may have changed in ways this package cannot know; such errors also
//     match ErrUnsupportedVersion. A negative revision;
//   - numbers that are not integers (1.5, 1e3) or do not fit (a duration
//     beyond time.Duration's range);
//   - an errors key that is not a status code: empty, not hexadecimal (a
//     "0x" prefix, a sign, spaces) or above ffff. kv_engine writes lowercase
//     digits without padding; uppercase digits and leading zeros are also
//     accepted, since they name a code unambiguously;
//   - two keys that name the same status ("1f" and "001F"), and a known
//     field appearing twice in one object (version, revision, errors; name,
//     desc, attrs, retry; the retry fields): the map would say two things;
//   - an entry without name or attrs (desc may be missing: it is only text);
//   - a retry spec without strategy, after or interval, with a strategy
//     other than constant, linear or exponential, or with a negative value.
//
// Fields Parse does not know, at any level, are skipped (after checking that
// they are valid JSON, nested at most 1000 deep), so a server may add some;
// an unknown field that appears twice is not detected. Strings decode as
// encoding/json decodes them: invalid UTF-8 and lone surrogates become
// U+FFFD rather than making the map corrupt, as names and descriptions are
// only text. Codes 0xff00..0xffff are reserved for testing and proxies and
// never sent by a server, but they are status codes and are accepted.
//
// # Cost
//
// Parse runs once per connection. It reads the JSON itself, in one pass
// without token values, so that it allocates little beyond the names and
// descriptions it keeps: kv_engine's 19 KB v2 map parses several times
// faster than through encoding/json's token API, which is what detecting
// duplicate keys would otherwise need (BenchmarkParseKVEngineV2). Lookup runs
// for every unknown status: a binary search over the sorted entries that
// allocates nothing (BenchmarkLookup).
package errmap
