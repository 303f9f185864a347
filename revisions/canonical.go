package revisions

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// canonical returns the layout of s that the hashes cover: one v1alpha1 spelling of
// what render builds from s, so that the spellings Dynamo's two versions allow for one
// pod hash alike. A DGD written in v1beta1 reaches the operator as the v1alpha1 its
// conversion projects (the main container's env, resources and probes in the dedicated
// fields, its envFrom in extraPodSpec.mainContainer), and one written in v1alpha1 as it
// was written (often envFromSecret, or env in mainContainer): without this they would
// hash apart, and rewriting a manifest from v1alpha1 to v1beta1 would roll every worker.
//
// Each rule keeps render's result (render/pod.go) unchanged:
//   - env: mainContainer's, then the dedicated envs, merged by name (the dedicated ones
//     win, as render applies them after), all in envs;
//   - envFrom: mainContainer's, then envFromSecret (render's order); exactly one
//     unprefixed Secret is envFromSecret, anything else stays in mainContainer;
//   - probes: the dedicated probe wins over mainContainer's (render applies it last),
//     kept in the dedicated field;
//   - resources: mainContainer's, with the dedicated ones set over them per resource
//     name (render's applyResources), written back in Dynamo's shape by name (cpu,
//     memory, nvidia.com/gpu as gpu, the gpuType's name as gpu with that gpuType, any
//     other as custom), quantities in canonical form; claims stay where they were
//     (render uses mainContainer's only);
//   - the name of mainContainer, and a container named main in extraPodSpec.containers,
//     which render replaces, are dropped; an empty mainContainer, extraPodSpec or
//     extraPodMetadata is none;
//   - sharedMemory: none, {} and a zero size are the default 8Gi (none); disabled
//     ignores its size.
//
// A manifest already spelled this way (every sample and Dynamo example: envFromSecret,
// gpu in resources, image, command and args in mainContainer) is its own canonical
// form, so its hashes are those of the operators before v1beta1. Another spelling
// hashes differently than it did; a running DGD still keeps its revision (Sync matches
// stored revisions by their canonical content, not by hash), and its next worker
// revision gets a canonical hash.
func canonical(s *v1alpha1.DynamoComponentDeploymentSharedSpec) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	c := s.DeepCopy()
	var main corev1.Container
	if c.ExtraPodSpec != nil && c.ExtraPodSpec.MainContainer != nil {
		main = *c.ExtraPodSpec.MainContainer
	}
	c.Envs = v1alpha1.MergeEnv(main.Env, c.Envs)
	main.Env = nil
	canonicalEnvFrom(c, &main)

	if c.LivenessProbe == nil {
		c.LivenessProbe = main.LivenessProbe
	}
	if c.ReadinessProbe == nil {
		c.ReadinessProbe = main.ReadinessProbe
	}
	main.LivenessProbe, main.ReadinessProbe = nil, nil

	c.Resources, main.Resources = canonicalResources(c.Resources, main.Resources)

	main.Name = ""
	placeMain(c, main)
	if m := c.ExtraPodMetadata; m != nil && len(m.Annotations) == 0 && len(m.Labels) == 0 {
		c.ExtraPodMetadata = nil
	}
	if shm := c.SharedMemory; shm != nil {
		switch {
		case shm.Disabled:
			c.SharedMemory = &v1alpha1.SharedMemorySpec{Disabled: true}
		case shm.Size == nil || shm.Size.IsZero():
			c.SharedMemory = nil
		}
	}
	return c
}

// canonicalEnvFrom moves envFromSecret and mainContainer's envFrom into one list, and
// spells a list of one plain Secret as envFromSecret (see canonical).
func canonicalEnvFrom(c *v1alpha1.DynamoComponentDeploymentSharedSpec, main *corev1.Container) {
	envFrom := slices.Clone(main.EnvFrom)
	if c.EnvFromSecret != nil && *c.EnvFromSecret != "" {
		envFrom = append(envFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: *c.EnvFromSecret}}})
	}
	c.EnvFromSecret, main.EnvFrom = nil, nil
	if len(envFrom) == 1 && envFrom[0].Prefix == "" && envFrom[0].ConfigMapRef == nil && envFrom[0].SecretRef != nil &&
		envFrom[0].SecretRef.Optional == nil && envFrom[0].SecretRef.Name != "" {
		c.EnvFromSecret = &envFrom[0].SecretRef.Name
	} else {
		main.EnvFrom = envFrom
	}
}

// placeMain puts what is left of mainContainer back into extraPodSpec (none when empty),
// drops a "main" container from extraPodSpec.podSpec, and an extraPodSpec left empty.
func placeMain(c *v1alpha1.DynamoComponentDeploymentSharedSpec, main corev1.Container) {
	empty := apiequality.Semantic.DeepEqual(main, corev1.Container{})
	if c.ExtraPodSpec == nil {
		if !empty {
			c.ExtraPodSpec = &v1alpha1.ExtraPodSpec{MainContainer: &main}
		}
		return
	}
	if empty {
		c.ExtraPodSpec.MainContainer = nil
	} else {
		c.ExtraPodSpec.MainContainer = &main
	}
	if ps := c.ExtraPodSpec.PodSpec; ps != nil {
		ps.Containers = slices.DeleteFunc(ps.Containers, func(x corev1.Container) bool { return x.Name == "main" })
		if apiequality.Semantic.DeepEqual(*ps, corev1.PodSpec{}) {
			c.ExtraPodSpec.PodSpec = nil
		}
	}
	if c.ExtraPodSpec.PodSpec == nil && c.ExtraPodSpec.MainContainer == nil {
		c.ExtraPodSpec = nil
	}
}

// canonicalResources merges mainContainer's resources and the dedicated ones as render
// does and spells the result in Dynamo's shape (see canonical). A value that does not
// parse is kept as written (render rejects it: InvalidSpec).
func canonicalResources(r *v1alpha1.Resources, main corev1.ResourceRequirements) (*v1alpha1.Resources, corev1.ResourceRequirements) {
	out := &v1alpha1.Resources{}
	if r != nil {
		out.Claims = r.Claims
	}
	var ok bool
	if out.Requests, ok = canonicalItem(main.Requests, itemOf(r, false)); !ok {
		return r, main
	}
	if out.Limits, ok = canonicalItem(main.Limits, itemOf(r, true)); !ok {
		return r, main
	}
	rest := corev1.ResourceRequirements{Claims: main.Claims}
	if out.Requests == nil && out.Limits == nil && len(out.Claims) == 0 {
		out = nil
	}
	return out, rest
}

func itemOf(r *v1alpha1.Resources, limits bool) *v1alpha1.ResourceItem {
	if r == nil {
		return nil
	}
	if limits {
		return r.Limits
	}
	return r.Requests
}

// canonicalItem merges list and item (item wins per name) into one item.
func canonicalItem(list corev1.ResourceList, item *v1alpha1.ResourceItem) (*v1alpha1.ResourceItem, bool) {
	merged := maps.Clone(list)
	gpuName := resourceGPU
	if item != nil {
		if item.GPUType != "" {
			gpuName = corev1.ResourceName(item.GPUType)
		}
		values := map[corev1.ResourceName]string{corev1.ResourceCPU: item.CPU, corev1.ResourceMemory: item.Memory, gpuName: item.GPU}
		for k, v := range item.Custom {
			values[corev1.ResourceName(k)] = v
		}
		for name, v := range values {
			if v == "" {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, false
			}
			if merged == nil {
				merged = corev1.ResourceList{}
			}
			merged[name] = q
		}
	}
	if len(merged) == 0 {
		return nil, true
	}
	out := &v1alpha1.ResourceItem{}
	for name, q := range merged {
		switch v := q.String(); name {
		case corev1.ResourceCPU:
			out.CPU = v
		case corev1.ResourceMemory:
			out.Memory = v
		case gpuName:
			out.GPU = v
			if gpuName != resourceGPU {
				out.GPUType = string(gpuName)
			}
		default:
			if out.Custom == nil {
				out.Custom = map[string]string{}
			}
			out.Custom[string(name)] = v
		}
	}
	return out, true
}

const resourceGPU = v1alpha1.ResourceGPU
