package client

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/kvwire/kvwire/retry"
	"github.com/stretchr/testify/assert"
)

// opKept lists the fields of op that reset keeps for the next operation,
// and why each cannot leak into it. Every other field must be zero after
// reset: a stale errCtx, value or token handed to the next caller is the
// worst kind of bug.
var opKept = map[string]string{
	"handle":  "bound once per op object to its own onResponse",
	"nmvBody": "scratch buffer, kept empty (len 0)",
	"z":       "scratch buffer, kept empty (len 0); zTried says whether it holds anything",
	"sd":      "subdoc storage, kept empty (subdoc.State.Keep)",
	"span":    "a cache of optrace.NameOf(spanFor, spanOpc), checked by spanName",
	"spanFor": "the key of span's cache",
	"spanOpc": "the key of span's cache",
}

// TestOpResetClearsEveryField fills every field of an op (every leaf of
// its nested structs) with a non-zero value, resets it, and requires every
// field reset does not keep to be zero again, and the kept ones to hold no
// state (empty buffers). A field added to op (or to a struct it embeds) is
// covered without listing it; one reset must keep goes into opKept.
func TestOpResetClearsEveryField(t *testing.T) {
	for _, cold := range []bool{true, false} {
		o := &op{}
		o.handle = o.onResponse
		fields := opFields(o)
		for _, f := range fields {
			if f.name == "handle" || !cold && f.cold {
				continue // a plain Get (not cold) leaves the cold fields clean
			}
			fillNonZero(t, f.v, f.name)
			if f.v.IsZero() {
				t.Fatalf("op.%s: could not be filled", f.name)
			}
		}
		o.cold = cold
		o.reset()
		for _, f := range fields {
			if _, kept := opKept[f.name]; !kept && !f.v.IsZero() {
				t.Errorf("cold %v: op.%s survives reset: %v (clear it, or list it in opKept with why it cannot leak)", cold, f.name, f.v.Interface())
			}
		}
		if len(o.nmvBody) != 0 || len(o.z) != 0 || len(o.sd.Lookups) != 0 || len(o.sd.Mutations) != 0 || o.sd.Fields != nil ||
			o.sd.Failed || o.sd.FailIndex != 0 || o.sd.FailStatus != 0 {
			t.Errorf("cold %v: kept state not emptied: nmvBody %d z %d sd %+v", cold, len(o.nmvBody), len(o.z), o.sd)
		}
		if !coldClean(&o.opCold) {
			t.Errorf("cold %v: cold fields not clean after reset", cold)
		}
		if reflect.ValueOf(o.handle).Pointer() == 0 {
			t.Errorf("cold %v: reset dropped the bound handle", cold)
		}
	}
}

// Every test of the package checks at each reset that an operation that
// did not set cold left its cold fields clean; benchmark runs (-test.bench)
// do not, so as to measure what users run.
func init() {
	if !benchmarking(os.Args[1:]) {
		checkCold = coldClean
	}
}

// coldClean reports whether the cold fields hold no state: all zero but
// the emptied buffers reset keeps.
func coldClean(c *opCold) bool {
	k := *c
	if len(k.nmvBody) != 0 || len(k.z) != 0 || len(k.sd.Lookups) != 0 || len(k.sd.Mutations) != 0 {
		return false
	}
	k.nmvBody, k.z, k.sd.Lookups, k.sd.Mutations = nil, nil, nil, nil
	return reflect.ValueOf(&k).Elem().IsZero()
}

func benchmarking(args []string) bool {
	for i, a := range args {
		a = "-" + strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "-test.bench="); ok {
			return v != ""
		}
		if a == "-test.bench" && i+1 < len(args) {
			return args[i+1] != ""
		}
	}
	return false
}

// TestOpColdWithoutFlagCaught: in the tests, an operation that writes a
// cold field without setting cold panics at reset rather than leaving it to
// the next operation.
func TestOpColdWithoutFlagCaught(t *testing.T) {
	o := &op{}
	o.name = "Get"
	o.errName = "stale"
	assert.Panics(t, o.reset)
	o = &op{}
	o.nmvBody = []byte{1}
	assert.Panics(t, o.reset)
	o = &op{}
	o.nmvBody = make([]byte, 0, 8)
	assert.NotPanics(t, o.reset, "an emptied buffer is clean")
}

type opField struct {
	name string
	cold bool // in opCold
	v    reflect.Value
}

// opFields lists the fields of op's parts (opHot, opCold), settable.
func opFields(o *op) []opField {
	var fs []opField
	v := reflect.ValueOf(o).Elem()
	for i := 0; i < v.NumField(); i++ {
		part := v.Field(i)
		if !v.Type().Field(i).Anonymous || part.Kind() != reflect.Struct {
			panic("op holds a field outside opHot and opCold: " + v.Type().Field(i).Name)
		}
		for j := 0; j < part.NumField(); j++ {
			fs = append(fs, opField{name: part.Type().Field(j).Name, cold: part.Type() == reflect.TypeOf(opCold{}), v: settable(part.Field(j))})
		}
	}
	return fs
}

type fillStrategy struct{ retry.Strategy }

type fillRetryStrategy struct{ RetryStrategy }

// interfaceFillers are non-nil values for the interfaces op holds.
var interfaceFillers = []any{&fillStrategy{}, &fillRetryStrategy{}, noopSpan{}, context.Background(), errors.New("stale"), fillQueued{}}

// fillQueued fills a conn.QueuedHook.
type fillQueued struct{}

func (fillQueued) Queued() {}

func settable(f reflect.Value) reflect.Value {
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// fillNonZero sets every leaf of v non-zero.
func fillNonZero(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.String:
		v.SetString("stale")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Chan:
		v.Set(reflect.MakeChan(v.Type(), 0))
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { return nil }))
	case reflect.Interface:
		for _, c := range interfaceFillers {
			if cv := reflect.ValueOf(c); cv.Type().Implements(v.Type()) {
				v.Set(cv)
				return
			}
		}
		t.Fatalf("%s: no filler for interface %s (add one to interfaceFillers)", path, v.Type())
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fillNonZero(t, v.Index(i), path)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fillNonZero(t, settable(v.Field(i)), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s: no filler for kind %s", path, v.Kind())
	}
}

func TestBenchmarkingArgs(t *testing.T) {
	assert.True(t, benchmarking([]string{"-test.bench=Get"}))
	assert.True(t, benchmarking([]string{"--test.bench", "Get"}))
	assert.False(t, benchmarking([]string{"-test.run", "X", "-test.bench="}))
	assert.False(t, benchmarking(nil))
}
