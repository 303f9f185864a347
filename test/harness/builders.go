package harness

import (
	"fmt"

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

// FrontendImage is the test frontend's image: a Dynamo 1.6 runtime, so the frontend is
// strict about worker namespaces (DYN_NAMESPACE_PREFIX_STRICT: only 8-hex suffixes).
const FrontendImage = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.0"

// NewDGD starts a DGD with a frontend of one replica (Dynamo's default frontend
// command, python3 -m dynamo.frontend).
func NewDGD(ns, name string) *DGD {
	d := &DGD{obj: &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{}},
	}}
	AddService(d.obj, "Frontend", v1alpha1.ComponentTypeFrontend, 1, FrontendImage)
	return d
}

// Model is the model every test worker serves.
const Model = "Qwen/Qwen3-0.6B"

// Service adds a service with an image and, for workers, the vLLM command line
// (`python3 -m dynamo.vllm --model Model` and args).
func (d *DGD) Service(name, componentType, sub string, replicas int32, image string, args ...string) *DGD {
	d.obj.Spec.Services[name] = &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ComponentType:    componentType,
		SubComponentType: sub,
		Replicas:         ptr.To(replicas),
		ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{
			Image: image, Command: []string{"python3", "-m", "dynamo.vllm"}, Args: append([]string{"--model", Model}, args...)}},
	}
	return d
}

// Disagg adds prefill and decode workers (vLLM's --disaggregation-mode).
func (d *DGD) Disagg(prefill, decode int32, image string) *DGD {
	return d.Service("prefill", v1alpha1.ComponentTypeWorker, v1alpha1.ComponentTypePrefill, prefill, image, "--disaggregation-mode", "prefill").
		Service("decode", v1alpha1.ComponentTypeWorker, v1alpha1.ComponentTypeDecode, decode, image, "--disaggregation-mode", "decode")
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

// Multinode makes every replica of a service a gang of n pods of one GPU each running
// tensor parallelism n, so that vLLM spans the gang (the operator wires it with mp).
func (d *DGD) Multinode(service string, n int32) *DGD {
	svc := d.obj.Spec.Services[service]
	svc.Multinode = &v1alpha1.MultinodeSpec{NodeCount: n}
	if svc.Resources == nil {
		svc.Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}
	}
	main := svc.ExtraPodSpec.MainContainer
	main.Args = append(main.Args, "--tensor-parallel-size", fmt.Sprint(n))
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

// Frameworks Worker knows.
const (
	VLLM   = "vllm"
	SGLang = "sglang"
	TRTLLM = "trtllm"
)

// Worker adds a worker service running framework fw (VLLM, SGLang, TRTLLM) as Dynamo's
// examples start it: `python3 -m dynamo.<fw>` with the model, `--disaggregation-mode
// <role>` for a prefill or decode role (role "" is aggregated), and with nodes >= 2
// every replica a gang of that many pods of one GPU each, whose tensor parallelism
// spans the gang (vLLM --tensor-parallel-size, SGLang --tp; TRT-LLM's mpirun spans it).
func (d *DGD) Worker(name, fw, role string, replicas, nodes int32, image string) *DGD {
	args := []string{"--model", Model}
	if fw != VLLM {
		args = []string{"--model-path", Model}
	}
	if role != "" {
		args = append(args, "--disaggregation-mode", role)
	}
	if nodes >= 2 {
		switch fw {
		case VLLM:
			args = append(args, "--tensor-parallel-size", fmt.Sprint(nodes))
		case SGLang:
			args = append(args, "--tp", fmt.Sprint(nodes))
		}
	}
	d.obj.Spec.Services[name] = &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ComponentType:    v1alpha1.ComponentTypeWorker,
		SubComponentType: role,
		Replicas:         ptr.To(replicas),
		Resources:        &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}},
		ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{
			Image: image, Command: []string{"python3", "-m", "dynamo." + fw}, Args: args}},
	}
	if nodes >= 2 {
		d.obj.Spec.Services[name].Multinode = &v1alpha1.MultinodeSpec{NodeCount: nodes}
	}
	return d
}
