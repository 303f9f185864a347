package harness

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// DGD builds DynamoGraphDeployments for tests.
type DGD struct {
	obj *v1alpha1.DynamoGraphDeployment
}

// NewDGD starts a DGD with a frontend of one replica.
func NewDGD(ns, name string) *DGD {
	d := &DGD{obj: &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{}},
	}}
	return d.Service("Frontend", v1alpha1.ComponentTypeFrontend, "", 1, "frontend:v1")
}

// Service adds a service with an image and, for workers, the vLLM command line.
func (d *DGD) Service(name, componentType, sub string, replicas int32, image string, args ...string) *DGD {
	d.obj.Spec.Services[name] = &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ComponentType:    componentType,
		SubComponentType: sub,
		Replicas:         ptr.To(replicas),
		ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{
			Image: image, Command: []string{"python3", "-m", "dynamo.vllm"}, Args: args}},
	}
	return d
}

// Disagg adds prefill and decode workers.
func (d *DGD) Disagg(prefill, decode int32, image string) *DGD {
	return d.Service("prefill", v1alpha1.ComponentTypeWorker, v1alpha1.ComponentTypePrefill, prefill, image, "--is-prefill-worker").
		Service("decode", v1alpha1.ComponentTypeWorker, v1alpha1.ComponentTypeDecode, decode, image)
}

// Rollout sets spec.rollout.
func (d *DGD) Rollout(surge, unavailable string) *DGD {
	s, u := intstr.Parse(surge), intstr.Parse(unavailable)
	d.rollout().MaxSurge, d.rollout().MaxUnavailable = &s, &u
	return d
}

// Partition sets spec.rollout.partition.
func (d *DGD) Partition(p string) *DGD {
	v := intstr.Parse(p)
	d.rollout().Partition = &v
	return d
}

// Strategy sets spec.rollout.strategy.
func (d *DGD) Strategy(s v1alpha1.RolloutStrategyType) *DGD {
	d.rollout().Strategy = s
	return d
}

// HistoryLimit sets spec.revisionHistoryLimit.
func (d *DGD) HistoryLimit(n int32) *DGD {
	d.obj.Spec.RevisionHistoryLimit = ptr.To(n)
	return d
}

func (d *DGD) rollout() *v1alpha1.RolloutSpec {
	if d.obj.Spec.Rollout == nil {
		d.obj.Spec.Rollout = &v1alpha1.RolloutSpec{}
	}
	return d.obj.Spec.Rollout
}

// Obj returns the built object.
func (d *DGD) Obj() *v1alpha1.DynamoGraphDeployment { return d.obj }

// SetImage sets the image of every worker service (a new worker revision).
func SetImage(dgd *v1alpha1.DynamoGraphDeployment, image string) {
	for _, name := range dgd.WorkerServiceNames() {
		dgd.Spec.Services[name].ExtraPodSpec.MainContainer.Image = image
	}
}

// Multinode makes every replica of a service a gang of n pods.
func (d *DGD) Multinode(service string, n int32) *DGD {
	d.obj.Spec.Services[service].Multinode = &v1alpha1.MultinodeSpec{NodeCount: n}
	return d
}

// Backend sets spec.backend.
func (d *DGD) Backend(b v1alpha1.BackendType) *DGD {
	d.obj.Spec.Backend = b
	return d
}

// AddService adds a non-worker service (a planner, say) to a live DGD object.
func AddService(dgd *v1alpha1.DynamoGraphDeployment, name, componentType string, replicas int32, image string) {
	dgd.Spec.Services[name] = &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ComponentType: componentType,
		Replicas:      ptr.To(replicas),
		ExtraPodSpec:  &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: image}},
	}
}
