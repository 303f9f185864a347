// Package analysis judges the metrics of an analysis step (spec.rollout.steps[].analysis)
// as Argo Rollouts' AnalysisRuns do (argoproj/argo-rollouts analysis/analysis.go,
// utils/evaluate/evaluate.go), with one difference the product asks for: a metric whose
// queries keep failing is inconclusive (the rollout holds for a person), never failed
// (an abort) and never passed.
//
// Everything here but the Prometheus client (prometheus.go) is a pure function of a
// metric's spec, its tally of measurements and the clock:
//
//   - Evaluate turns one query result into a measurement: failureCondition true →
//     Failed (it wins); successCondition alone false → Failed; failureCondition alone
//     false → Successful; both set and neither true → Inconclusive. A query that failed,
//     returned no sample, NaN, or more than one series is an Error: retried after
//     min(interval, 10s), not counted.
//   - Assess decides a metric's phase from its tally: Failed once failed >
//     failureLimit, Inconclusive once inconclusive > inconclusiveLimit or consecutive
//     errors > consecutiveErrorLimit, Successful once count measurements are taken,
//     else Running (comparisons strict, as Argo's: failureLimit 0 fails on the first
//     failed measurement).
//   - Combine decides a step's phase from its metrics': any Failed → Failed, else any
//     Inconclusive → Inconclusive, else all Successful → Successful, else Running.
//   - NextAt says when a running metric's next measurement is due.
package analysis

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Phase is a metric's or a step's state, or a measurement's outcome (Error is only
// a measurement's).
type Phase string

// Phases.
const (
	Running      Phase = "Running"
	Successful   Phase = "Successful"
	Failed       Phase = "Failed"
	Inconclusive Phase = "Inconclusive"
	Error        Phase = "Error"
)

// Defaults of a metric's optional fields.
const (
	DefaultInterval              = 30 * time.Second
	DefaultCount                 = 1
	DefaultConsecutiveErrorLimit = 4
	// ErrorRetryInterval is the longest wait before a query that erred is retried.
	ErrorRetryInterval = 10 * time.Second
)

// Metric is one metric of an analysis step, defaults applied.
type Metric struct {
	Name                            string
	Query                           string
	SuccessCondition                string
	FailureCondition                string
	Interval, InitialDelay          time.Duration
	Count                           int32
	FailureLimit, InconclusiveLimit int32
	ConsecutiveErrorLimit           int32
	// Args are the values of the arguments its query reads ({{args.<name>}}): the
	// step's, over its analysis template's defaults.
	Args map[string]string
}

// Result is what a query returned: Samples values (a scalar is one), the first of
// them in Value; or Err. At is the instant the query was evaluated at (zero: the
// caller's clock), which the measurement records.
type Result struct {
	Value   float64
	Samples int
	Err     error
	At      time.Time
}

// Measurement is one evaluated query.
type Measurement struct {
	Phase   Phase
	Value   string // the value, as shownValue writes it ("" for an error)
	Message string // why, for an Error or an Inconclusive or Failed measurement
	At      time.Time
}

// Tally is what is recorded of a metric's measurements: counts, and the last one.
type Tally struct {
	Successful, Failed, Inconclusive, Errors int32
	// ConsecutiveErrors counts the errors since the last measurement that did not err.
	ConsecutiveErrors int32
	// Last is the latest measurement (zero At: none yet).
	Last Measurement
}

// Count is the number of counted measurements: every one but errors.
func (t Tally) Count() int32 { return t.Successful + t.Failed + t.Inconclusive }

// Add returns the tally with m added.
func (t Tally) Add(m Measurement) Tally {
	switch m.Phase {
	case Successful:
		t.Successful++
	case Failed:
		t.Failed++
	case Inconclusive:
		t.Inconclusive++
	case Error:
		t.Errors++
		t.ConsecutiveErrors++
	}
	if m.Phase != Error {
		t.ConsecutiveErrors = 0
	}
	t.Last = m
	return t
}

// Evaluate judges one query result against the metric's conditions at time at.
// Conditions must have been checked with CheckCondition (a condition that does not compile or
// does not yield a bool makes an Error measurement).
func Evaluate(m Metric, r Result, at time.Time) Measurement {
	out := Measurement{At: at}
	fail := func(msg string) Measurement {
		out.Phase, out.Message = Error, msg
		return out
	}
	switch {
	case r.Err != nil:
		return fail(r.Err.Error())
	case r.Samples == 0:
		return fail("no data: the query returned no sample")
	case r.Samples > 1:
		return fail(fmt.Sprintf("the query returned %d series: aggregate them to one (sum, max, avg...)", r.Samples))
	}
	out.Value = FormatValue(r.Value)
	if math.IsNaN(r.Value) {
		return fail("no data: the query returned NaN (no requests in its range?)")
	}
	success, failure, err := conditions(m, r.Value)
	if err != nil {
		return fail(err.Error())
	}
	out.Value = shownValue(m, r.Value, out.Value, success, failure)
	switch {
	case failure != nil && *failure:
		out.Phase, out.Message = Failed, fmt.Sprintf("failureCondition %q holds for %s", m.FailureCondition, out.Value)
	case success != nil && *success:
		out.Phase = Successful
	case success != nil && failure == nil:
		out.Phase, out.Message = Failed, fmt.Sprintf("successCondition %q does not hold for %s", m.SuccessCondition, out.Value)
	case success == nil:
		out.Phase = Successful // failureCondition alone, false
	default:
		out.Phase, out.Message = Inconclusive, fmt.Sprintf("neither successCondition %q nor failureCondition %q holds for %s", m.SuccessCondition, m.FailureCondition, out.Value)
	}
	return out
}

// shownValue is v as a measurement records it and messages print it: ShortValue (six
// significant digits: 1.0000000000000002, a ratio of two sums as Prometheus writes it,
// reads 1), unless the conditions judge the short value otherwise than v (v within
// rounding of a threshold: "result <= 1.2" does not hold for 1.2000000000001, which
// would read 1.2), then exact.
func shownValue(m Metric, v float64, exact string, success, failure *bool) string {
	short := ShortValue(v)
	rounded, err := strconv.ParseFloat(short, 64)
	if err != nil || rounded == v {
		return short
	}
	s2, f2, err := conditions(m, rounded)
	if err != nil || !sameVerdict(s2, success) || !sameVerdict(f2, failure) {
		return exact
	}
	return short
}

func sameVerdict(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// conditions evaluates the set conditions of m on v (nil: not set).
func conditions(m Metric, v float64) (success, failure *bool, err error) {
	eval := func(expr string) (*bool, error) {
		if expr == "" {
			return nil, nil
		}
		b, err := evalCondition(expr, v)
		if err != nil {
			return nil, err
		}
		return &b, nil
	}
	if success, err = eval(m.SuccessCondition); err != nil {
		return nil, nil, fmt.Errorf("successCondition: %w", err)
	}
	if failure, err = eval(m.FailureCondition); err != nil {
		return nil, nil, fmt.Errorf("failureCondition: %w", err)
	}
	return success, failure, nil
}

// Assess is a metric's phase from its tally, and why (for a finished metric).
func Assess(m Metric, t Tally) (Phase, string) {
	switch {
	case t.Failed > m.FailureLimit:
		return Failed, fmt.Sprintf("metric %q failed: %d failed measurement(s), more than failureLimit %d; last value %s: %s",
			m.Name, t.Failed, m.FailureLimit, orNone(t.Last.Value), t.Last.Message)
	case t.Inconclusive > m.InconclusiveLimit:
		return Inconclusive, fmt.Sprintf("metric %q is inconclusive: %d inconclusive measurement(s), more than inconclusiveLimit %d; last: %s",
			m.Name, t.Inconclusive, m.InconclusiveLimit, t.Last.Message)
	case t.ConsecutiveErrors > m.ConsecutiveErrorLimit:
		return Inconclusive, fmt.Sprintf("metric %q is inconclusive: %d queries in a row erred, more than consecutiveErrorLimit %d; last: %s",
			m.Name, t.ConsecutiveErrors, m.ConsecutiveErrorLimit, t.Last.Message)
	case t.Count() >= m.Count:
		return Successful, fmt.Sprintf("metric %q passed: %d of %d measurement(s) successful; last value %s",
			m.Name, t.Successful, t.Count(), orNone(t.Last.Value))
	}
	return Running, ""
}

// Combine is the phase of a step from its metrics' phases (see the package doc).
func Combine(phases []Phase) Phase {
	out := Successful
	for _, p := range phases {
		switch {
		case p == Failed:
			return Failed
		case p == Inconclusive:
			out = Inconclusive
		case p == Running && out == Successful:
			out = Running
		}
	}
	return out
}

// NextAt is when a running metric's next measurement is due, for a step that
// started at start: initialDelay after the start for the first, interval after the
// last counted one, and min(interval, ErrorRetryInterval) after an error.
func NextAt(m Metric, t Tally, start time.Time) time.Time {
	switch {
	case t.Last.At.IsZero():
		return start.Add(m.InitialDelay)
	case t.Last.Phase == Error:
		return t.Last.At.Add(min(m.Interval, ErrorRetryInterval))
	}
	return t.Last.At.Add(m.Interval)
}

// ShortValue writes v for people: at most six significant digits, so that
// 4.148936170212766 reads 4.14894; a very large or very small magnitude keeps an
// exponent (1.5e+20), NaN and the infinities read as Prometheus writes them.
func ShortValue(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return FormatValue(v)
	}
	short := strconv.FormatFloat(v, 'g', 6, 64)
	if strings.ContainsRune(short, 'e') {
		if a := math.Abs(v); a >= 1e-4 && a < 1e15 {
			r, _ := strconv.ParseFloat(short, 64)
			return strconv.FormatFloat(r, 'f', -1, 64)
		}
	}
	return short
}

// FormatValue formats a sample value as Prometheus' API does.
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none"
	}
	return s
}
