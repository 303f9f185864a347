package v1alpha1_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// FuzzDGDJSON decodes arbitrary JSON into a DynamoGraphDeployment and checks that:
//   - the JSON round trip is stable: json → struct → json → struct → json gives the same
//     bytes the second time and semantically equal structs (the first decode may differ
//     from the second: invalid UTF-8 is replaced, embedded raw JSON is compacted,
//     quantities are canonicalised);
//   - DeepCopy returns an equal, independent object;
//   - the helpers the operator calls on every pass (ServiceNames, WorkerServiceNames,
//     RolloutOrDefault, HistoryLimit, BackendOrDefault and, per service, NodeCount,
//     IsMultinode, IsWorker, Role, DesiredReplicas) never panic and return consistent
//     answers.
//
// The seed corpus is every manifest of config/samples (converted to JSON) plus a few
// edge cases; `go test` runs the seeds, `go test -fuzz=FuzzDGDJSON ./api/v1alpha1/`
// explores.
func FuzzDGDJSON(f *testing.F) {
	samples, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	if len(samples) == 0 {
		f.Fatal("no samples in config/samples")
	}
	for _, s := range samples {
		raw, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			f.Fatalf("%s: %v", s, err)
		}
		f.Add(j)
	}
	for _, s := range []string{
		`{}`,
		`null`,
		`{"spec":{"services":{"a":null,"b":{}}}}`,
		`{"spec":{"services":{"w":{"componentType":"worker","replicas":-3,"multinode":{"nodeCount":0}}}}}`,
		`{"spec":{"services":{"p":{"componentType":"prefill","subComponentType":"decode","multinode":{"nodeCount":4}}}}}`,
		`{"spec":{"rollout":{"maxSurge":3,"maxUnavailable":"10%","partition":"50%","paused":true,"progressDeadlineSeconds":1}}}`,
		`{"spec":{"rollout":null,"revisionHistoryLimit":-1,"backend":"Nope"}}`,
		`{"spec":{"services":{"w":{"autoscaling":{"a" : [1, 2]},"volumeMounts":[null,{"x":1}],"pvc":null}},"pvcs":[{"k":"v"}]}}`,
		`{"spec":{"services":{"w":{"extraPodSpec":{"mainContainer":{"image":"x","resources":{"limits":{"cpu":"1.5","memory":"1.5Gi"}}},"nodeSelector":{"a":"b"}}}}}}`,
		`{"metadata":{"name":"x","creationTimestamp":"2024-01-02T03:04:05Z","labels":{"a":"b"}},"status":{"services":{"w":{"replicas":1}},"rollingUpdate":{"startTime":"2024-01-02T03:04:05Z"}}}`,
		"{\"spec\":{\"services\":{\"\xff\":{\"componentType\":\"\xfeworker\"}}}}",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		var d1 v1alpha1.DynamoGraphDeployment
		if err := json.Unmarshal(data, &d1); err != nil {
			return // not a DGD
		}
		checkHelpers(t, &d1)
		checkDeepCopy(t, &d1)

		j1, err := json.Marshal(&d1)
		if err != nil {
			t.Fatalf("marshal after a successful unmarshal: %v", err)
		}
		var d2 v1alpha1.DynamoGraphDeployment
		if err := json.Unmarshal(j1, &d2); err != nil {
			t.Fatalf("unmarshal of our own output %s: %v", j1, err)
		}
		j2, err := json.Marshal(&d2)
		if err != nil {
			t.Fatalf("second marshal: %v", err)
		}
		if !bytes.Equal(j1, j2) {
			t.Fatalf("JSON round trip not stable:\n first %s\nsecond %s", j1, j2)
		}
		var d3 v1alpha1.DynamoGraphDeployment
		if err := json.Unmarshal(j2, &d3); err != nil {
			t.Fatalf("third unmarshal: %v", err)
		}
		if !equality.Semantic.DeepEqual(&d2, &d3) {
			t.Fatalf("struct round trip not stable for %s", j1)
		}
		checkHelpers(t, &d2)
		checkDeepCopy(t, &d2)
		if !slices.Equal(d1.ServiceNames(), d2.ServiceNames()) && validUTF8Keys(&d1) {
			t.Fatalf("service names changed in the round trip: %v vs %v", d1.ServiceNames(), d2.ServiceNames())
		}
	})
}

// checkDeepCopy checks that DeepCopy is equal and shares nothing mutable that a
// caller would write through (the services map).
func checkDeepCopy(t *testing.T, d *v1alpha1.DynamoGraphDeployment) {
	t.Helper()
	c := d.DeepCopy()
	if !reflect.DeepEqual(d, c) {
		t.Fatalf("DeepCopy differs from the original")
	}
	if !equality.Semantic.DeepEqual(d, c) {
		t.Fatalf("DeepCopy differs semantically from the original")
	}
	if obj := d.DeepCopyObject(); !reflect.DeepEqual(obj, c) {
		t.Fatalf("DeepCopyObject differs from DeepCopy")
	}
	before, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	names := make([]string, 0, len(c.Spec.Services))
	for name := range c.Spec.Services {
		names = append(names, name)
	}
	for _, name := range names {
		if s := c.Spec.Services[name]; s != nil {
			s.ComponentType += "-mutated"
			s.Replicas = nil
		}
		c.Spec.Services[name+"-added"] = nil
	}
	if c.Spec.Rollout != nil {
		c.Spec.Rollout.Paused = !c.Spec.Rollout.Paused
	}
	c.Labels = map[string]string{"mutated": "yes"}
	after, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("writing to the DeepCopy changed the original:\nbefore %s\n after %s", before, after)
	}
}

// checkHelpers calls every helper the operator relies on and checks their answers
// against each other.
func checkHelpers(t *testing.T, d *v1alpha1.DynamoGraphDeployment) {
	t.Helper()
	names := d.ServiceNames()
	if !slices.IsSorted(names) {
		t.Fatalf("ServiceNames not sorted: %v", names)
	}
	nonNil := 0
	for _, s := range d.Spec.Services {
		if s != nil {
			nonNil++
		}
	}
	if len(names) != nonNil {
		t.Fatalf("ServiceNames has %d names for %d services", len(names), nonNil)
	}
	workers := d.WorkerServiceNames()
	if !slices.IsSorted(workers) {
		t.Fatalf("WorkerServiceNames not sorted: %v", workers)
	}
	for _, w := range workers {
		if !slices.Contains(names, w) {
			t.Fatalf("worker %q is not a service", w)
		}
	}
	for _, name := range names {
		s := d.Spec.Services[name]
		if s.IsWorker() != slices.Contains(workers, name) {
			t.Fatalf("IsWorker(%q) disagrees with WorkerServiceNames", name)
		}
		if n := s.NodeCount(); n < 1 {
			t.Fatalf("NodeCount(%q) = %d", name, n)
		}
		if s.IsMultinode() != (s.NodeCount() >= 2) {
			t.Fatalf("IsMultinode(%q) disagrees with NodeCount", name)
		}
		switch r := s.Role(); r {
		case v1alpha1.ComponentTypePrefill, v1alpha1.ComponentTypeDecode, v1alpha1.ComponentTypeWorker:
		default:
			t.Fatalf("Role(%q) = %q", name, r)
		}
		if s.Replicas == nil && s.DesiredReplicas() != 1 {
			t.Fatalf("DesiredReplicas(%q) without replicas = %d, want 1", name, s.DesiredReplicas())
		}
		if s.Replicas != nil && s.DesiredReplicas() != *s.Replicas {
			t.Fatalf("DesiredReplicas(%q) = %d, replicas %d", name, s.DesiredReplicas(), *s.Replicas)
		}
	}
	// NodeCount is documented nil-safe.
	var none *v1alpha1.DynamoComponentDeploymentSharedSpec
	if none.NodeCount() != 1 {
		t.Fatal("NodeCount of a nil service is not 1")
	}
	r := d.RolloutOrDefault()
	if r.Strategy == "" || r.MaxSurge == nil || r.MaxUnavailable == nil || r.ProgressDeadlineSeconds == nil {
		t.Fatalf("RolloutOrDefault left a field unset: %+v", r)
	}
	if d.Spec.Rollout != nil && d.Spec.Rollout.Strategy != "" && r.Strategy != d.Spec.Rollout.Strategy {
		t.Fatalf("RolloutOrDefault changed the strategy")
	}
	if got := d.HistoryLimit(); d.Spec.RevisionHistoryLimit == nil && got != v1alpha1.DefaultRevisionHistoryLimit {
		t.Fatalf("HistoryLimit default = %d", got)
	}
	if d.BackendOrDefault() == "" {
		t.Fatal("BackendOrDefault is empty")
	}
	_ = d.RuntimeNamespaceBase()
	// RolloutOrDefault must not hand out the package defaults by reference.
	if d.Spec.Rollout == nil || (d.Spec.Rollout.MaxSurge == nil && d.Spec.Rollout.MaxUnavailable == nil) {
		r.MaxSurge.StrVal, r.MaxUnavailable.StrVal = "mutated", "mutated"
		if v1alpha1.DefaultMaxSurge.String() == "mutated" || v1alpha1.DefaultMaxUnavailable.String() == "mutated" {
			t.Fatal("RolloutOrDefault returned the package defaults by reference")
		}
	}
}

// validUTF8Keys reports whether every service name is valid UTF-8 (JSON encoding
// replaces invalid bytes, so such names legitimately change in the round trip).
func validUTF8Keys(d *v1alpha1.DynamoGraphDeployment) bool {
	for name := range d.Spec.Services {
		if !utf8.ValidString(name) {
			return false
		}
	}
	return true
}
