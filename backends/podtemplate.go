package backends

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// ResourceGPU is what Dynamo's `gpu` resource means.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// MainContainerName is the name given to the main container when the manifest has none.
const MainContainerName = "main"

// PodTemplate builds the pod template of one service at one worker revision (hash, empty
// for a stable service) from the DGD: extraPodSpec as the base, mainContainer first,
// Dynamo resources, graph then service envs, envFromSecret, probes, labels and
// annotations, and the Dynamo namespace variables that isolate worker revisions.
// svc is the service's template, which for an old revision differs from the DGD's spec.
func PodTemplate(dgd *v1alpha1.DynamoGraphDeployment, service, hash string, svc *v1alpha1.DynamoComponentDeploymentSharedSpec, graphEnvs []corev1.EnvVar) (corev1.PodTemplateSpec, error) {
	var t corev1.PodTemplateSpec
	if svc.ExtraPodSpec != nil && svc.ExtraPodSpec.PodSpec != nil {
		svc.ExtraPodSpec.PodSpec.DeepCopyInto(&t.Spec)
	}
	main, err := mainContainer(service, svc)
	if err != nil {
		return t, err
	}
	main.Env = mergeEnv(graphEnvs, svc.Envs, main.Env, NamespaceEnv(dgd, svc.IsWorker(), hash))
	if svc.EnvFromSecret != nil && *svc.EnvFromSecret != "" {
		main.EnvFrom = append(main.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: *svc.EnvFromSecret}}})
	}
	if err := applyResources(&main.Resources, svc.Resources); err != nil {
		return t, fmt.Errorf("spec.services[%s].resources: %w", service, err)
	}
	if svc.LivenessProbe != nil {
		main.LivenessProbe = svc.LivenessProbe.DeepCopy()
	}
	if svc.ReadinessProbe != nil {
		main.ReadinessProbe = svc.ReadinessProbe.DeepCopy()
	}
	containers := []corev1.Container{main}
	for _, c := range t.Spec.Containers {
		if c.Name != main.Name {
			containers = append(containers, c)
		}
	}
	t.Spec.Containers = containers
	t.Labels = podLabels(dgd, service, hash, svc)
	t.Annotations = podAnnotations(svc)
	return t, nil
}

func mainContainer(service string, svc *v1alpha1.DynamoComponentDeploymentSharedSpec) (corev1.Container, error) {
	if svc.ExtraPodSpec == nil || svc.ExtraPodSpec.MainContainer == nil || svc.ExtraPodSpec.MainContainer.Image == "" {
		return corev1.Container{}, fmt.Errorf("spec.services[%s].extraPodSpec.mainContainer.image is required", service)
	}
	c := *svc.ExtraPodSpec.MainContainer.DeepCopy()
	if c.Name == "" {
		c.Name = MainContainerName
	}
	return c, nil
}

// NamespaceEnv is the Dynamo namespace of a worker revision (DYN_NAMESPACE=<base>,
// DYN_NAMESPACE_WORKER_SUFFIX=<hash>: effective namespace <base>-<hash>) or of a stable
// service, which discovers every revision by prefix (DYN_NAMESPACE_PREFIX=<base>).
func NamespaceEnv(dgd *v1alpha1.DynamoGraphDeployment, worker bool, hash string) []corev1.EnvVar {
	base := dgd.RuntimeNamespaceBase()
	env := []corev1.EnvVar{{Name: v1alpha1.EnvDynNamespace, Value: base}}
	if worker {
		return append(env, corev1.EnvVar{Name: v1alpha1.EnvDynNamespaceWorkerSuffix, Value: hash})
	}
	return append(env, corev1.EnvVar{Name: v1alpha1.EnvDynNamespacePrefix, Value: base})
}

// EffectiveNamespace is the Dynamo namespace a replica of (service, hash) registers in.
func EffectiveNamespace(dgd *v1alpha1.DynamoGraphDeployment, worker bool, hash string) string {
	if worker {
		return dgd.RuntimeNamespaceBase() + "-" + hash
	}
	return dgd.RuntimeNamespaceBase()
}

// mergeEnv concatenates env lists; a later variable replaces an earlier one of the same
// name in place, so the order of first appearance is kept and the result is stable.
func mergeEnv(lists ...[]corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	index := map[string]int{}
	for _, l := range lists {
		for _, e := range l {
			if i, ok := index[e.Name]; ok {
				out[i] = e
				continue
			}
			index[e.Name] = len(out)
			out = append(out, e)
		}
	}
	return out
}

func applyResources(dst *corev1.ResourceRequirements, r *v1alpha1.Resources) error {
	if r == nil {
		return nil
	}
	var err error
	if dst.Requests, err = applyItem(dst.Requests, r.Requests); err != nil {
		return fmt.Errorf("requests: %w", err)
	}
	if dst.Limits, err = applyItem(dst.Limits, r.Limits); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	return nil
}

func applyItem(dst corev1.ResourceList, item *v1alpha1.ResourceItem) (corev1.ResourceList, error) {
	if item == nil {
		return dst, nil
	}
	values := map[corev1.ResourceName]string{
		corev1.ResourceCPU:    item.CPU,
		corev1.ResourceMemory: item.Memory,
		ResourceGPU:           item.GPU,
	}
	for k, v := range item.Custom {
		values[corev1.ResourceName(k)] = v
	}
	for name, v := range values {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return dst, fmt.Errorf("%s: %w", name, err)
		}
		if dst == nil {
			dst = corev1.ResourceList{}
		}
		dst[name] = q
	}
	return dst, nil
}

func podLabels(dgd *v1alpha1.DynamoGraphDeployment, service, hash string, svc *v1alpha1.DynamoComponentDeploymentSharedSpec) map[string]string {
	l := map[string]string{}
	maps.Copy(l, svc.Labels)
	if svc.ExtraPodMetadata != nil {
		maps.Copy(l, svc.ExtraPodMetadata.Labels)
	}
	maps.Copy(l, Labels(dgd, service, hash))
	if svc.ComponentType != "" {
		l[v1alpha1.LabelComponentType] = sanitizeLabelValue(svc.ComponentType)
	}
	return l
}

func podAnnotations(svc *v1alpha1.DynamoComponentDeploymentSharedSpec) map[string]string {
	a := map[string]string{}
	for k, v := range svc.Annotations {
		if k != v1alpha1.AnnotationMaxSurge && k != v1alpha1.AnnotationMaxUnavailable && k != v1alpha1.AnnotationChangeCause {
			a[k] = v
		}
	}
	if svc.ExtraPodMetadata != nil {
		maps.Copy(a, svc.ExtraPodMetadata.Annotations)
	}
	if len(a) == 0 {
		return nil
	}
	return a
}
