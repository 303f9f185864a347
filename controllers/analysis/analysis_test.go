package analysis

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func metric(success, failure string) Metric {
	return Metric{Name: "m", SuccessCondition: success, FailureCondition: failure, Interval: 10 * time.Second,
		Count: 3, ConsecutiveErrorLimit: DefaultConsecutiveErrorLimit}
}

func TestEvaluate(t *testing.T) {
	one := func(v float64) Result { return Result{Value: v, Samples: 1} }
	cases := map[string]struct {
		m       Metric
		r       Result
		want    Phase
		message string
	}{
		"success holds":                          {metric("result < 0.05", ""), one(0.01), Successful, ""},
		"success alone fails":                    {metric("result < 0.05", ""), one(0.2), Failed, `successCondition "result < 0.05" does not hold for 0.2`},
		"failure alone holds":                    {metric("", "result > 0.1"), one(0.2), Failed, `failureCondition "result > 0.1" holds for 0.2`},
		"failure alone does not hold":            {metric("", "result > 0.1"), one(0.05), Successful, ""},
		"failure wins when both hold":            {metric("result > 0", "result > 0.1"), one(0.2), Failed, "failureCondition"},
		"both set, neither holds":                {metric("result < 0.05", "result > 0.1"), one(0.07), Inconclusive, "neither"},
		"ints compare with doubles":              {metric("result < 1", ""), one(0.5), Successful, ""},
		"query error":                            {metric("result < 1", ""), Result{Err: errors.New("connection refused")}, Error, "connection refused"},
		"no sample":                              {metric("result < 1", ""), Result{}, Error, "no data"},
		"more than one series":                   {metric("result < 1", ""), Result{Value: 1, Samples: 3}, Error, "3 series"},
		"NaN is no data, not a failure":          {metric("result < 1", ""), one(math.NaN()), Error, "NaN"},
		"a condition that is not a bool errs":    {metric("result + 1.0", ""), one(1), Error, "not a bool"},
		"a condition that does not compile errs": {metric("result <", ""), one(1), Error, "successCondition"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := Evaluate(c.m, c.r, t0)
			if got.Phase != c.want || !strings.Contains(got.Message, c.message) || !got.At.Equal(t0) {
				t.Errorf("Evaluate = %+v, want phase %s with a message containing %q", got, c.want, c.message)
			}
		})
	}
}

func TestAssess(t *testing.T) {
	m := metric("result < 1", "")
	m.FailureLimit, m.InconclusiveLimit, m.ConsecutiveErrorLimit = 1, 0, 2
	add := func(phases ...Phase) Tally {
		var t Tally
		for i, p := range phases {
			t = t.Add(Measurement{Phase: p, Value: "0.5", Message: string(p), At: t0.Add(time.Duration(i) * time.Second)})
		}
		return t
	}
	cases := map[string]struct {
		t    Tally
		want Phase
	}{
		"nothing yet":                        {add(), Running},
		"one failure within failureLimit 1":  {add(Failed), Running},
		"two failures: more than the limit":  {add(Failed, Successful, Failed), Failed},
		"count reached":                      {add(Successful, Failed, Successful), Successful},
		"errors are not counted":             {add(Successful, Error, Successful, Error), Running},
		"one inconclusive over limit 0":      {add(Inconclusive), Inconclusive},
		"two errors in a row are within 2":   {add(Error, Error), Running},
		"three errors in a row":              {add(Error, Error, Error), Inconclusive},
		"a measurement resets the error run": {add(Error, Error, Successful, Error, Error), Running},
		"failure before count is reached":    {add(Failed, Failed), Failed},
		"errors then count reached":          {add(Error, Successful, Successful, Successful), Successful},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got, msg := Assess(m, c.t); got != c.want {
				t.Errorf("Assess = %s (%s), want %s; tally %+v", got, msg, c.want, c.t)
			}
		})
	}
	// The messages name the metric and the value.
	if _, msg := Assess(m, add(Failed, Failed)); !strings.Contains(msg, `metric "m" failed`) || !strings.Contains(msg, "last value 0.5") {
		t.Errorf("failure message %q", msg)
	}
}

func TestCombine(t *testing.T) {
	cases := []struct {
		in   []Phase
		want Phase
	}{
		{nil, Successful},
		{[]Phase{Successful, Successful}, Successful},
		{[]Phase{Successful, Running}, Running},
		{[]Phase{Running, Inconclusive}, Inconclusive},
		{[]Phase{Inconclusive, Failed, Running}, Failed},
	}
	for _, c := range cases {
		if got := Combine(c.in); got != c.want {
			t.Errorf("Combine(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestNextAt(t *testing.T) {
	m := metric("result < 1", "")
	m.InitialDelay, m.Interval = 5*time.Second, time.Minute
	if got := NextAt(m, Tally{}, t0); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("first: %s", got)
	}
	last := t0.Add(7 * time.Second)
	if got := NextAt(m, Tally{}.Add(Measurement{Phase: Successful, At: last}), t0); !got.Equal(last.Add(time.Minute)) {
		t.Errorf("after a measurement: %s", got)
	}
	if got := NextAt(m, Tally{}.Add(Measurement{Phase: Error, At: last}), t0); !got.Equal(last.Add(ErrorRetryInterval)) {
		t.Errorf("after an error: %s, want the retry interval", got)
	}
	m.Interval = 2 * time.Second
	if got := NextAt(m, Tally{}.Add(Measurement{Phase: Error, At: last}), t0); !got.Equal(last.Add(2 * time.Second)) {
		t.Errorf("after an error with a short interval: %s", got)
	}
}

func TestSanitizeLabel(t *testing.T) {
	if got := SanitizeLabel("ns.a-b_c9"); got != "ns_a_b_c9" {
		t.Errorf("SanitizeLabel = %q", got)
	}
}
