package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/revisions"
)

// TestWrittenVersion: a revision prints in the version of the newest write of the
// DGD's spec that is neither a status write nor the plugin's own.
func TestWrittenVersion(t *testing.T) {
	at := func(min int) *metav1.Time {
		return &metav1.Time{Time: time.Date(2026, 11, 27, 12, min, 0, 0, time.UTC)}
	}
	spec := &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:components":{}}}`)}
	meta := &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{}}}`)}
	entry := func(manager, version string, min int, f *metav1.FieldsV1, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, APIVersion: "nvidia.com/" + version, Time: at(min), FieldsV1: f,
			Operation: metav1.ManagedFieldsOperationUpdate, Subresource: sub}
	}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"none: the preferred version", nil, "v1beta1"},
		{"applied as v1alpha1", []metav1.ManagedFieldsEntry{entry("kubectl-client-side-apply", "v1alpha1", 1, spec, "")}, "v1alpha1"},
		{"applied as v1beta1", []metav1.ManagedFieldsEntry{entry("kubectl", "v1beta1", 1, spec, "")}, "v1beta1"},
		{"the plugin's set image after a v1alpha1 apply", []metav1.ManagedFieldsEntry{
			entry("kubectl-client-side-apply", "v1alpha1", 1, spec, ""), entry(PluginFieldManager, "v1beta1", 2, spec, "")}, "v1alpha1"},
		{"the operator's status and a metadata write after a v1alpha1 apply", []metav1.ManagedFieldsEntry{
			entry("kubectl-client-side-apply", "v1alpha1", 1, spec, ""), entry("manager", "v1beta1", 3, spec, "status"),
			entry("kubectl-annotate", "v1beta1", 4, meta, "")}, "v1alpha1"},
		{"re-applied as v1beta1", []metav1.ManagedFieldsEntry{
			entry("kubectl-client-side-apply", "v1alpha1", 1, spec, ""), entry("argocd-controller", "v1beta1", 5, spec, "")}, "v1beta1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := writtenVersion(&metav1.ObjectMeta{ManagedFields: tc.entries}); got != tc.want {
				t.Errorf("writtenVersion = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestHistoryInV1beta1: a revision of the graph written as config/samples/v1beta1/
// disagg.yaml prints as that manifest's spec, replicas and the operator's rollout
// settings left out: what the user wrote, component for component.
func TestHistoryInV1beta1(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "samples", "v1beta1", "disagg.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var written v1beta1.DynamoGraphDeployment
	if err := yaml.UnmarshalStrict(raw, &written); err != nil {
		t.Fatal(err)
	}
	var alpha v1alpha1.DynamoGraphDeployment // as the plugin reads it (conversion.Client)
	if err := conversion.FromHub(&written, &alpha); err != nil {
		t.Fatal(err)
	}
	rev, err := revisions.NewRevision(&alpha, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := templatesYAML(rev, "v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	for _, noise := range []string{"creationTimestamp", "replicas", "resources: {}", "services:", "extraPodSpec"} {
		if strings.Contains(text, noise) {
			t.Errorf("the print has %q:\n%s", noise, text)
		}
	}
	var printed v1beta1.DynamoGraphDeploymentSpec
	if err := yaml.UnmarshalStrict([]byte(text), &printed); err != nil {
		t.Fatalf("the print is not a v1beta1 spec: %v\n%s", err, text)
	}
	want := written.Spec.DeepCopy()
	want.Rollout = nil
	for i := range want.Components {
		want.Components[i].Replicas = nil
	}
	if d := cmp.Diff(*want, printed); d != "" {
		t.Errorf("printed spec (-written +printed):\n%s\n%s", d, text)
	}
}
