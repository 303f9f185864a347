package v1alpha1

import (
	"math"
	"testing"
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
	if got := ShortValueOf("not a number"); got != "not a number" {
		t.Errorf("ShortValueOf kept %q", got)
	}
	if got := ShortValueOf("1.0000000000000002"); got != "1" {
		t.Errorf("ShortValueOf(1.0000000000000002) = %q", got)
	}
}
