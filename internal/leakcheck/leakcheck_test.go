package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestDetectsLeakAndRelease(t *testing.T) {
	stop := make(chan struct{})
	go func() { <-stop }()
	leaked := Wait(100 * time.Millisecond)
	if !strings.Contains(leaked, "TestDetectsLeakAndRelease") {
		t.Fatalf("leaked goroutine not reported; got %q", leaked)
	}
	close(stop)
	if leaked := Wait(2 * time.Second); leaked != "" {
		t.Fatalf("goroutine exited but still reported:\n%s", leaked)
	}
}
