package client

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kvwire/kvwire/internal/settings"
)

// TestSettingsRoundTrip: Options.settings and setSettings copy every field
// of internal/settings' Settings, both ways: a field forgotten in either
// direction would come back zero.
func TestSettingsRoundTrip(t *testing.T) {
	var want settings.Settings
	fill(reflect.ValueOf(&want).Elem())
	var o Options
	o.setSettings(&want)
	assert.Equal(t, want, o.settings())
}

// fill sets every field of v, nested structs' included, to a value that is
// not zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(v.Type().Size()) + 7)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.String:
		v.SetString("x")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

// TestSettingsConstants: the values internal/settings checks BootstrapOn
// against are client's.
func TestSettingsConstants(t *testing.T) {
	assert.Equal(t, []string{settings.BootstrapOnBoth, settings.BootstrapOnCCCP, settings.BootstrapOnHTTP},
		[]string{string(BootstrapOnBoth), string(BootstrapOnCCCP), string(BootstrapOnHTTP)})
	assert.True(t, errors.Is(settingsErrors.ConnStr("a=b", "why"), ErrInvalidConnStr))
	assert.Equal(t, DefaultKVTimeout, defaults(Options{}).KVTimeout)
	assert.Equal(t, 20*time.Second, defaults(Options{KVTimeout: 20 * time.Second}).KVTimeout)
}
