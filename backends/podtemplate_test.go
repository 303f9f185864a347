package backends

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

func sampleDGD() *v1alpha1.DynamoGraphDeployment {
	return &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "g"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{
			Envs: []corev1.EnvVar{{Name: "A", Value: "graph"}, {Name: "B", Value: "graph"}},
			Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
				"decode": {
					ComponentType: "worker", SubComponentType: "decode", Replicas: ptr.To[int32](2),
					Envs:          []corev1.EnvVar{{Name: "B", Value: "service"}, {Name: v1alpha1.EnvDynNamespace, Value: "user"}},
					EnvFromSecret: ptr.To("hf-token"),
					Annotations:   map[string]string{v1alpha1.AnnotationMaxSurge: "1", "keep": "me"},
					Labels:        map[string]string{"team": "llm"},
					Resources: &v1alpha1.Resources{
						Limits:   &v1alpha1.ResourceItem{GPU: "2", Custom: map[string]string{"rdma/ib": "1"}},
						Requests: &v1alpha1.ResourceItem{CPU: "4", Memory: "32Gi"},
					},
					ExtraPodSpec: &v1alpha1.ExtraPodSpec{
						PodSpec: &corev1.PodSpec{NodeSelector: map[string]string{"gpu": "h100"},
							Containers: []corev1.Container{{Name: "sidecar", Image: "s:1"}}},
						MainContainer: &corev1.Container{Image: "vllm:1", Args: []string{"--tp", "2"},
							Env: []corev1.EnvVar{{Name: "C", Value: "container"}}},
					},
				},
				"Frontend": {ComponentType: "frontend", ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: "fe:1"}}},
			},
		},
	}
}

func TestPodTemplateWorker(t *testing.T) {
	dgd := sampleDGD()
	tmpl, err := PodTemplate(dgd, "decode", "abc123", dgd.Spec.Services["decode"], dgd.Spec.Envs)
	if err != nil {
		t.Fatal(err)
	}
	main := tmpl.Spec.Containers[0]
	if main.Name != MainContainerName || main.Image != "vllm:1" || len(tmpl.Spec.Containers) != 2 {
		t.Fatalf("containers: %+v", tmpl.Spec.Containers)
	}
	wantEnv := []corev1.EnvVar{
		{Name: "A", Value: "graph"}, {Name: "B", Value: "service"},
		{Name: v1alpha1.EnvDynNamespace, Value: "team-g"}, {Name: "C", Value: "container"},
		{Name: v1alpha1.EnvDynNamespaceWorkerSuffix, Value: "abc123"},
	}
	if d := cmp.Diff(wantEnv, main.Env); d != "" {
		t.Errorf("env (-want +got), the operator's DYN_* win over the user's:\n%s", d)
	}
	if got := main.Resources.Limits[ResourceGPU]; !got.Equal(resource.MustParse("2")) {
		t.Errorf("gpu limit %v", got)
	}
	if got := main.Resources.Limits["rdma/ib"]; !got.Equal(resource.MustParse("1")) {
		t.Errorf("custom limit %v", got)
	}
	if got := main.Resources.Requests[corev1.ResourceMemory]; !got.Equal(resource.MustParse("32Gi")) {
		t.Errorf("memory request %v", got)
	}
	if main.EnvFrom[0].SecretRef.Name != "hf-token" {
		t.Errorf("envFrom %+v", main.EnvFrom)
	}
	if tmpl.Spec.NodeSelector["gpu"] != "h100" {
		t.Errorf("extraPodSpec lost: %+v", tmpl.Spec)
	}
	wantLabels := map[string]string{"team": "llm", v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "decode",
		v1alpha1.LabelWorkerHash: "abc123", v1alpha1.LabelComponentType: "worker", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	if d := cmp.Diff(wantLabels, tmpl.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"keep": "me"}, tmpl.Annotations); d != "" {
		t.Errorf("annotations (-want +got), the rolling-update ones stay off pods:\n%s", d)
	}
}

func TestPodTemplateFrontendDiscoversByPrefix(t *testing.T) {
	dgd := sampleDGD()
	tmpl, err := PodTemplate(dgd, "Frontend", "", dgd.Spec.Services["Frontend"], nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{{Name: v1alpha1.EnvDynNamespace, Value: "team-g"}, {Name: v1alpha1.EnvDynNamespacePrefix, Value: "team-g"}}
	if d := cmp.Diff(want, tmpl.Spec.Containers[0].Env); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, ok := tmpl.Labels[v1alpha1.LabelWorkerHash]; ok {
		t.Errorf("stable pods must not carry a worker hash")
	}
}

func TestPodTemplateErrorsNameTheField(t *testing.T) {
	dgd := sampleDGD()
	svc := dgd.Spec.Services["decode"]
	svc.ExtraPodSpec.MainContainer.Image = ""
	if _, err := PodTemplate(dgd, "decode", "h", svc, nil); err == nil || err.Error() != "spec.services[decode].extraPodSpec.mainContainer.image is required" {
		t.Fatalf("err = %v", err)
	}
	svc.ExtraPodSpec.MainContainer.Image = "x"
	svc.Resources.Limits.CPU = "lots"
	if _, err := PodTemplate(dgd, "decode", "h", svc, nil); err == nil || err.Error()[:34] != "spec.services[decode].resources: l" {
		t.Fatalf("err = %v", err)
	}
}
