package decide

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/steps"
)

// maxMeasurements is how many measurements status keeps per metric (the latest); the
// tallies count every one.
const maxMeasurements = 10

// analysisBook is status.rollingUpdate.analyses as one pass updates it: the recorded
// runs of this attempt, the measurements taken and the step machine's judgements.
type analysisBook struct {
	runs []v1alpha1.AnalysisStatus
	// before are the phases recorded before the pass, by step: a run whose phase
	// changes to a finished one gets its Event.
	before map[int32]v1alpha1.AnalysisPhase
}

func newAnalysisBook(recorded []v1alpha1.AnalysisStatus) *analysisBook {
	b := &analysisBook{before: map[int32]v1alpha1.AnalysisPhase{}}
	for _, r := range recorded {
		b.runs = append(b.runs, *r.DeepCopy())
		b.before[r.Step] = r.Phase
	}
	return b
}

// run is the record of analysis step i that started at start, made if missing.
func (b *analysisBook) run(i int, start metav1.Time) *v1alpha1.AnalysisStatus {
	for k := range b.runs {
		if b.runs[k].Step == int32(i) {
			return &b.runs[k]
		}
	}
	b.runs = append(b.runs, v1alpha1.AnalysisStatus{Step: int32(i), Phase: v1alpha1.AnalysisRunning, StartTime: &start})
	sort.Slice(b.runs, func(x, y int) bool { return b.runs[x].Step < b.runs[y].Step })
	return b.run(i, start)
}

// metricOfRun is the record of one metric of r, made if missing.
func metricOfRun(r *v1alpha1.AnalysisStatus, name string) *v1alpha1.MetricStatus {
	for k := range r.Metrics {
		if r.Metrics[k].Name == name {
			return &r.Metrics[k]
		}
	}
	r.Metrics = append(r.Metrics, v1alpha1.MetricStatus{Name: name, Phase: v1alpha1.AnalysisRunning})
	return &r.Metrics[len(r.Metrics)-1]
}

// tallies are the recorded tallies of the analysis step the state is at (none for a
// step not recorded yet).
func (b *analysisBook) tallies(st steps.State) map[string]analysis.Tally {
	out := map[string]analysis.Tally{}
	for _, r := range b.runs {
		if r.Step != int32(st.Index) {
			continue
		}
		for _, m := range r.Metrics {
			out[m.Name] = tallyOf(m)
		}
	}
	return out
}

// tallyOf is the tally a metric's record keeps: its counts and its last measurement.
func tallyOf(m v1alpha1.MetricStatus) analysis.Tally {
	t := analysis.Tally{Successful: m.Successful, Failed: m.Failed, Inconclusive: m.Inconclusive, Errors: m.Error, ConsecutiveErrors: m.ConsecutiveError}
	if n := len(m.Measurements); n > 0 {
		last := m.Measurements[n-1]
		t.Last = analysis.Measurement{Phase: analysis.Phase(last.Phase), Value: last.Value, Message: last.Message, At: last.Time.Time}
	}
	return t
}

// add records a measurement of metric of the analysis step at st.
func (b *analysisBook) add(st steps.State, metric string, m analysis.Measurement) {
	ms := metricOfRun(b.run(st.Index, metav1.NewTime(st.Start)), metric)
	t := tallyOf(*ms).Add(m)
	ms.Successful, ms.Failed, ms.Inconclusive, ms.Error, ms.ConsecutiveError = t.Successful, t.Failed, t.Inconclusive, t.Errors, t.ConsecutiveErrors
	ms.Measurements = append(ms.Measurements, v1alpha1.Measurement{Phase: v1alpha1.MeasurementPhase(m.Phase), Value: m.Value, Message: m.Message, Time: metav1.NewMicroTime(m.At)})
	if n := len(ms.Measurements); n > maxMeasurements {
		ms.Measurements = ms.Measurements[n-maxMeasurements:]
	}
}

// judged records the step machine's judgement of analysis steps.
func (b *analysisBook) judged(js []steps.Judged) {
	for _, j := range js {
		r := b.run(j.Step, metav1.NewTime(j.Start))
		r.Phase, r.Message = v1alpha1.AnalysisPhase(j.Phase), j.Message
		if j.Promoted {
			r.Message = "promoted before the analysis ended"
			if j.Phase != analysis.Running {
				r.Message = "promoted: " + j.Message
			}
		}
		for _, m := range j.Metrics {
			ms := metricOfRun(r, m.Name)
			ms.Phase, ms.Message = v1alpha1.AnalysisPhase(m.Phase), m.Message
		}
	}
}

// statuses are the runs as the pass leaves them, by step.
func (b *analysisBook) statuses() []v1alpha1.AnalysisStatus { return b.runs }

// finished are the runs whose phase the pass changed to a finished one.
func (b *analysisBook) finished() []v1alpha1.AnalysisStatus {
	var out []v1alpha1.AnalysisStatus
	for _, r := range b.runs {
		if r.Phase != v1alpha1.AnalysisRunning && b.before[r.Step] != r.Phase {
			out = append(out, r)
		}
	}
	return out
}
