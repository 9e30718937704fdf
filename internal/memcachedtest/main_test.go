package memcachedtest

import (
	"testing"

	"github.com/kvwire/kvwire/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
