package analysis

import (
	"math"
	"testing"
	"time"
)

func TestShortValue(t *testing.T) {
	for in, want := range map[float64]string{
		1.0000000000000002:  "1",
		0.9999999999999999:  "1",
		4.148936170212766:   "4.14894",
		0.30000000000000004: "0.3",
		0:                   "0",
		-0.05:               "-0.05",
		0.000123456789:      "0.000123457",
		1234567:             "1234570",
		1.5e20:              "1.5e+20",
		2.5e-9:              "2.5e-09",
		math.NaN():          "NaN",
		math.Inf(1):         "+Inf",
		math.Inf(-1):        "-Inf",
	} {
		if got := ShortValue(in); got != want {
			t.Errorf("ShortValue(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestShownValue: a measurement records the short value, unless the conditions would
// judge it otherwise than the exact one.
func TestShownValue(t *testing.T) {
	le := Metric{Name: "ratio", SuccessCondition: "result <= 1.2", Count: 1}
	for v, want := range map[float64]string{
		1.0000000000000002: "1",
		4.148936170212766:  "4.14894",
		1.2000000000001:    "1.2000000000001", // reads 1.2, which would pass
		1.19999999999:      "1.2",             // passes either way
	} {
		got := Evaluate(le, Result{Value: v, Samples: 1}, time.Time{}).Value
		if got != want {
			t.Errorf("value %v recorded as %q, want %q", v, got, want)
		}
	}
}
