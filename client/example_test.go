package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// User is a document of the examples.
type User struct {
	Name  string   `json:"name"`
	Langs []string `json:"langs"`
}

// connectToMock starts an in-process mock cluster and connects to its
// bucket, as Connect would to "couchbase://10.0.0.1/travel-sample". The
// returned function closes both.
func connectToMock() (*client.Client, func()) {
	mc, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Connect(context.Background(), mc.ConnString(), &client.Options{
		Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword,
		Bucket:   mockcluster.DefaultBucket,
		// The mock runs in this process: a busy machine delays its
		// answers as much as the client's, past the default second.
		HealthCheck: client.HealthCheckOptions{ProbeTimeout: time.Minute},
	})
	if err != nil {
		mc.Close()
		log.Fatal(err) // errors.Is(err, client.ErrAuthenticationFailure), ErrBucketNotFound, ...
	}
	return c, func() { _ = c.Close(); mc.Close() }
}

// The typed JSON path: UpsertJSON encodes a value with encoding/json and
// writes it with the JSON common flags, which every Couchbase SDK reads;
// GetJSON reads it back into a T.
func Example() {
	c, done := connectToMock()
	defer done()
	ctx := context.Background()
	users := c.DefaultCollection()

	_, err := client.UpsertJSON(ctx, users, "u:1", User{Name: "Ada", Langs: []string{"en", "fr"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	u, res, err := client.GetJSON[User](ctx, users, "u:1", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s speaks %v\n", u.Name, u.Langs)
	fmt.Printf("flags 0x%08x (%s), datatype %s\n", res.Flags, client.FormatOf(res.Flags), res.Datatype)
	// Output:
	// Ada speaks [en fr]
	// flags 0x02000000 (JSON), datatype json
}

// Raw bytes are stored as given, with the binary common flags on a
// Couchbase bucket; Get returns them as the caller's own copy.
func ExampleCollection_Upsert() {
	c, done := connectToMock()
	defer done()
	ctx := context.Background()
	col := c.DefaultCollection()

	if _, err := col.Upsert(ctx, "blob", []byte{0xca, 0xfe}, nil); err != nil {
		log.Fatal(err)
	}
	res, err := col.Get(ctx, "blob", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("% x, %s value\n", res.Value, client.FormatOf(res.Flags))

	// JSON text already encoded: the JSON option sets the JSON flags and
	// datatype.
	if _, err := col.Upsert(ctx, "cfg", []byte(`{"debug":true}`), &client.UpsertOptions{JSON: true}); err != nil {
		log.Fatal(err)
	}
	var cfg map[string]bool
	res, err = col.Get(ctx, "cfg", nil)
	if err == nil {
		err = res.ContentAs(&cfg)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg["debug"])
	// Output:
	// ca fe, binary value
	// true
}

// Errors are tested with errors.Is against the client's sentinels; a
// *KeyValueError carries the details (operation, key, node, retries).
func Example_errors() {
	c, done := connectToMock()
	defer done()
	ctx := context.Background()
	col := c.DefaultCollection()

	_, err := col.Get(ctx, "missing", nil)
	fmt.Println(errors.Is(err, client.ErrDocumentNotFound))
	var kv *client.KeyValueError
	if errors.As(err, &kv) {
		fmt.Println(kv.Op, kv.Key)
	}

	m, err := col.Upsert(ctx, "k", []byte("v1"), nil)
	if err != nil {
		log.Fatal(err)
	}
	// A write conditional on a CAS that is no longer the document's.
	_, err = col.Replace(ctx, "k", []byte("v2"), &client.ReplaceOptions{Cas: m.Cas + 1})
	fmt.Println(errors.Is(err, client.ErrCasMismatch))
	switch {
	case errors.Is(err, client.ErrAmbiguous):
		// The write may have been applied: read before deciding.
	case err != nil:
		// Not applied.
	}

	// A binary value decoded into a struct: the read succeeded, the
	// decoding says why it cannot.
	_, _, err = client.GetJSON[User](ctx, col, "k", nil)
	fmt.Println(errors.Is(err, client.ErrDecodingFailure))
	// Output:
	// true
	// Get missing
	// true
	// true
}

// UpsertString stores text with the string common flags; ContentAs decodes
// a value by its flags with the client's Transcoder.
func ExampleGetResult_ContentAs() {
	c, done := connectToMock()
	defer done()
	ctx := context.Background()
	col := c.DefaultCollection()

	if _, err := client.UpsertString(ctx, col, "greeting", "héllo", nil); err != nil {
		log.Fatal(err)
	}
	res, err := col.Get(ctx, "greeting", nil)
	if err != nil {
		log.Fatal(err)
	}
	var s string
	if err := res.ContentAs(&s); err != nil {
		log.Fatal(err)
	}
	fmt.Println(s, client.FormatOf(res.Flags))
	// Output:
	// héllo string
}

// Increment with Initial creates a missing counter; Delta 0 reads it.
func ExampleCollection_Increment() {
	c, done := connectToMock()
	defer done()
	ctx := context.Background()
	col := c.DefaultCollection()

	start := uint64(100)
	r, err := col.Increment(ctx, "visits", &client.IncrementOptions{Delta: 1, Initial: &start})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Value)
	r, err = col.Increment(ctx, "visits", &client.IncrementOptions{Delta: 5})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Value)
	r, err = col.Increment(ctx, "visits", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Value)
	// Output:
	// 100
	// 105
	// 105
}
