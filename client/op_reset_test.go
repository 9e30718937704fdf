package client

import (
	"context"
	"errors"
	"github.com/kvwire/kvwire/retry"
	"reflect"
	"testing"
	"unsafe"
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
	o := &op{}
	o.handle = o.onResponse
	v := reflect.ValueOf(o).Elem()
	rt := v.Type()
	for i := 0; i < rt.NumField(); i++ {
		name := rt.Field(i).Name
		if name == "handle" {
			continue
		}
		fillNonZero(t, settable(v.Field(i)), name)
		if settable(v.Field(i)).IsZero() {
			t.Fatalf("op.%s: could not be filled", name)
		}
	}
	o.reset()
	for i := 0; i < rt.NumField(); i++ {
		name := rt.Field(i).Name
		f := settable(v.Field(i))
		if _, kept := opKept[name]; !kept {
			if !f.IsZero() {
				t.Errorf("op.%s survives reset: %v (clear it, or list it in opKept with why it cannot leak)", name, f.Interface())
			}
		}
	}
	if len(o.nmvBody) != 0 || len(o.z) != 0 || len(o.sd.Lookups) != 0 || len(o.sd.Mutations) != 0 || o.sd.Fields != nil ||
		o.sd.Failed || o.sd.FailIndex != 0 || o.sd.FailStatus != 0 {
		t.Errorf("kept state not emptied: nmvBody %d z %d sd %+v", len(o.nmvBody), len(o.z), o.sd)
	}
	if reflect.ValueOf(o.handle).Pointer() == 0 {
		t.Error("reset dropped the bound handle")
	}
}

type fillStrategy struct{ retry.Strategy }

type fillRetryStrategy struct{ RetryStrategy }

// interfaceFillers are non-nil values for the interfaces op holds.
var interfaceFillers = []any{&fillStrategy{}, &fillRetryStrategy{}, noopSpan{}, context.Background(), errors.New("stale")}

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
