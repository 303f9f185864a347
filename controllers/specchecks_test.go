package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

// TestSpecChecksRemember: a verdict is given again without rendering while the
// generation, restart id, labels and annotations are the same (shown by a spec changed
// behind the cache's back: no image, which render refuses, still passes), and checked
// anew when any of them changes or the DGD is another (UID) or forgotten.
func TestSpecChecksRemember(t *testing.T) {
	dgd := &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", UID: "u1", Generation: 1,
			Annotations: map[string]string{"a": "1"}, Labels: map[string]string{"l": "1"}},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"worker": {ComponentType: "worker", ExtraPodSpec: &v1alpha1.ExtraPodSpec{
				MainContainer: &corev1.Container{Image: "img:1"}}},
		}},
	}
	var c specChecks
	cfg := render.Config{}
	if err := c.validate(dgd, cfg); err != nil {
		t.Fatalf("valid DGD refused: %v", err)
	}
	dgd.Spec.Services["worker"].ExtraPodSpec.MainContainer.Image = ""
	if err := render.Validate(dgd, cfg); err == nil {
		t.Fatal("render.Validate accepts a worker without image: the test needs a spec it refuses")
	}
	if err := c.validate(dgd, cfg); err != nil {
		t.Fatalf("same generation, labels, annotations: the remembered verdict, got %v", err)
	}
	changes := map[string]func(d *v1alpha1.DynamoGraphDeployment){
		"generation":  func(d *v1alpha1.DynamoGraphDeployment) { d.Generation++ },
		"annotations": func(d *v1alpha1.DynamoGraphDeployment) { d.Annotations = map[string]string{"a": "2"} },
		"labels":      func(d *v1alpha1.DynamoGraphDeployment) { d.Labels = nil },
		"uid":         func(d *v1alpha1.DynamoGraphDeployment) { d.UID = "u2" },
		"restart": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Status.Restart = &v1alpha1.RestartStatus{ObservedID: "r1"}
		},
	}
	for name, change := range changes {
		d := dgd.DeepCopy()
		change(d)
		if err := c.validate(d, cfg); err == nil {
			t.Errorf("%s changed: the spec must be checked anew (no image), got no error", name)
		}
		// remember the valid verdict of dgd again for the next case
		c.forget(types.NamespacedName{Namespace: "ns", Name: "g"})
		d.Spec.Services["worker"].ExtraPodSpec.MainContainer.Image = "img:1"
		ok := dgd.DeepCopy()
		ok.Spec.Services["worker"].ExtraPodSpec.MainContainer.Image = "img:1"
		if err := c.validate(ok, cfg); err != nil {
			t.Fatal(err)
		}
	}
	c.forget(types.NamespacedName{Namespace: "ns", Name: "g"})
	if err := c.validate(dgd, cfg); err == nil {
		t.Error("forgotten: the spec must be checked anew")
	}
}
