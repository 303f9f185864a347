package planner_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// bytes is a reader that yields 0 once the data runs out.
type bytes struct{ data []byte }

func (b *bytes) next() int {
	if len(b.data) == 0 {
		return 0
	}
	v := b.data[0]
	b.data = b.data[1:]
	return int(v)
}

func (b *bytes) budget() planner.IntOrPercent {
	v := b.next()
	return planner.IntOrPercent{Value: int32(v % 64), Percent: v >= 128}
}

var fuzzNames = []string{"prefill", "decode", "worker", "extra", "gone"}

// decodeInput builds a bounded Input from fuzz bytes: up to 4 services (names may
// repeat) of 0-16 replicas, up to 9 workloads on revisions 0-3 of those or unknown
// services, with counts that may be negative or inconsistent (Ready > Spec...).
func decodeInput(data []byte) planner.Input {
	b := &bytes{data}
	var in planner.Input
	for range 1 + b.next()%4 {
		in.Spec.Services = append(in.Spec.Services, planner.ServiceSpec{
			Name: fuzzNames[b.next()%4], Replicas: int32(b.next() % 17),
			MaxSurge: b.budget(), MaxUnavailable: b.budget(), UnreadyFirst: b.next()%2 == 0})
	}
	switch b.next() % 4 {
	case 1:
		in.Spec.Partition = &planner.IntOrPercent{Value: int32(b.next() % 20)}
	case 2:
		in.Spec.Partition = &planner.IntOrPercent{Value: int32(b.next() % 120), Percent: true}
	}
	in.Spec.Paused = b.next()%6 == 0
	if b.next()%8 == 0 {
		in.Spec.Strategy = planner.Recreate
	}
	in.UpdateRevision = int64(b.next() % 4)
	for range b.next() % 10 {
		in.Workloads = append(in.Workloads, planner.Workload{Service: fuzzNames[b.next()%5],
			Revision: int64(b.next() % 4), Spec: int32(int8(b.next())) % 24,
			Current: int32(int8(b.next())) % 24, Ready: int32(int8(b.next())) % 26})
	}
	return in
}

// FuzzCompute checks that Compute never panics, is deterministic, and that its plan
// keeps every invariant the input kept (reference checker: surge, ratio/orphan per
// revision, availability) — and that the exported CheckStep agrees.
func FuzzCompute(f *testing.F) {
	for _, seed := range []string{
		"", "\x01\x00\x04\x80\x80\x01\x00\x00\x00\x02\x03\x00\x01\x04\x04\x04\x01\x01\x00\x00\x00",
		"\x02\x00\x08\x01\x00\x01\x01\x02\x01\x00\x00\x01\x00\x00\x02\x06\x00\x01\x08\x08\x08\x01\x01\x04\x04\x04\x00\x02\x02\x02\x02",
		"\x03\x00\x01\x00\x01\x00\x01\x04\x02\x00\x01\x02\x01\x32\x01\x03\x03\x00\x01\x01\x01\x02\x01\x02\x02\x02",
		"\x01\x02\x10\x40\x40\x00\x02\x05\x01\x00\x02\x04\x00\x00\x10\x10\x10\x02\x02\x05\x05\x05",
		strings.Repeat("\xff", 64), strings.Repeat("\x07\x81", 40),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := decodeInput(data)
		p := planner.Compute(in)
		if !reflect.DeepEqual(p, planner.Compute(in)) {
			t.Fatalf("not deterministic: %+v", in)
		}
		if errs := refCheck(in, p); len(errs) > 0 {
			t.Fatalf("%v\ninput %+v\nplan %+v", errs, in, p)
		}
		if v := planner.CheckStep(in, p); len(v) > 0 {
			t.Fatalf("CheckStep disagrees with the reference checker: %v\ninput %+v\nplan %+v", v, in, p)
		}
		if p.Done != (p.Phase == planner.PhaseCompleted) || p.Reason == "" {
			t.Fatalf("phase/done/reason: %+v", p)
		}
	})
}

// FuzzPartitionCounts checks O_s against the reference formula and that both the
// held and the updated split satisfy the ratio and orphan rules.
func FuzzPartitionCounts(f *testing.F) {
	f.Add([]byte{2, 4, 2, 2, 50})
	f.Add([]byte{3, 8, 4, 1, 1, 3})
	f.Add([]byte{2, 1, 5, 2, 40})
	f.Add([]byte{4, 0, 64, 7, 3, 1, 200})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &bytes{data}
		var spec planner.Spec
		for i := range 1 + b.next()%4 {
			spec.Services = append(spec.Services, planner.ServiceSpec{Name: fuzzNames[i], Replicas: int32(int8(b.next()))})
		}
		switch b.next() % 3 {
		case 1:
			spec.Partition = &planner.IntOrPercent{Value: int32(int8(b.next()))}
		case 2:
			spec.Partition = &planner.IntOrPercent{Value: int32(int8(b.next())) * 2, Percent: true}
		}
		got, want := planner.PartitionCounts(spec), refPartition(spec)
		held, updated := map[string]int{}, map[string]int{}
		for _, s := range spec.Services {
			if int(got[s.Name]) != want[s.Name] || got[s.Name] < 0 || got[s.Name] > max(s.Replicas, 0) {
				t.Fatalf("%s: got %d want %d (%+v)", s.Name, got[s.Name], want[s.Name], spec)
			}
			held[s.Name], updated[s.Name] = int(got[s.Name]), int(max(s.Replicas, 0)-got[s.Name])
		}
		svcs := refServices(spec)
		if !refSplitOK(held, svcs) || !refSplitOK(updated, svcs) {
			t.Fatalf("split out of ratio: held %v updated %v (%+v)", held, updated, spec)
		}
	})
}

// refSplitOK applies refPoolOK to a service→count map.
func refSplitOK(counts map[string]int, svcs map[string]refService) bool {
	var rows []refRow
	for name, c := range counts {
		rows = append(rows, refRow{refKey: refKey{name, 1}, r: svcs[name].r, spec: c})
	}
	return refPoolOK(rows, 1, func(r refRow) int { return r.spec })
}
