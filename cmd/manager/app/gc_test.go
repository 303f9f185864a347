package app

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestApplyGC: the manager sets its garbage collector's target from --gc-percent,
// unless GOGC is set in its environment.
func TestApplyGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "100") // the runtime read it at start; ApplyGC leaves it
	if got := (Tuning{GCPercent: 50}).ApplyGC(); got != 100 {
		t.Fatalf("with GOGC set, ApplyGC = %d, want the environment's 100", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("with GOGC set, the target became %d", now)
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if got := DefaultTuning.ApplyGC(); got != 50 {
		t.Fatalf("ApplyGC = %d, want the default 50", got)
	}
	if now := debug.SetGCPercent(100); now != 50 {
		t.Fatalf("the target is %d, want 50", now)
	}
}
