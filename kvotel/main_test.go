package kvotel

import (
	"testing"

	"github.com/kvwire/kvwire/internal/leakcheck"
)

// TestMain fails the tests when a goroutine outlives them: the clients
// are closed and the mock clusters stopped by then, and the adapters start
// none of their own.
func TestMain(m *testing.M) { leakcheck.Main(m) }
