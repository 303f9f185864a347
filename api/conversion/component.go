package conversion

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
)

const resourceGPU = v1alpha1.ResourceGPU

// hubType is v1beta1's type of a v1alpha1 service: worker with subComponentType
// prefill or decode becomes prefill or decode; any other componentType is kept as is
// (conversion rejects no value, as Dynamo's does not).
func hubType(s *v1alpha1.DynamoComponentDeploymentSharedSpec) string {
	if promotesSubType(s) {
		return s.SubComponentType
	}
	return s.ComponentType
}

func promotesSubType(s *v1alpha1.DynamoComponentDeploymentSharedSpec) bool {
	return s.ComponentType == v1alpha1.ComponentTypeWorker &&
		(s.SubComponentType == v1alpha1.ComponentTypePrefill || s.SubComponentType == v1alpha1.ComponentTypeDecode)
}

// spokeType is the inverse: prefill and decode become worker plus subComponentType.
func spokeType(t string) (componentType, subComponentType string) {
	if t == v1beta1.ComponentTypePrefill || t == v1beta1.ComponentTypeDecode {
		return v1alpha1.ComponentTypeWorker, t
	}
	return t, ""
}

// toHubComponent converts one v1alpha1 service to a v1beta1 component (DYNAMO-V1BETA1.md
// §2.3, alpha to beta), without any saved payload.
func toHubComponent(name string, s *v1alpha1.DynamoComponentDeploymentSharedSpec) v1beta1.DynamoComponentDeploymentSharedSpec {
	c := v1beta1.DynamoComponentDeploymentSharedSpec{
		ComponentName:          name,
		ComponentType:          hubType(s),
		ProviderOverride:       s.ProviderOverride.DeepCopy(),
		RuntimeVersionOverride: s.RuntimeVersionOverride,
		GlobalDynamoNamespace:  s.GlobalDynamoNamespace,
		Replicas:               clonePtr(s.Replicas),
		MinAvailable:           clonePtr(s.MinAvailable),
		Multinode:              s.Multinode.DeepCopy(),
		ModelRef:               s.ModelRef.DeepCopy(),
		EPPConfig:              s.EPPConfig.DeepCopy(),
		TopologyConstraint:     s.TopologyConstraint.DeepCopy(),
	}
	if shm := s.SharedMemory; shm != nil {
		switch {
		case shm.Disabled:
			q := resource.MustParse("0")
			c.SharedMemorySize = &q
		case shm.Size != nil && !shm.Size.IsZero():
			q := shm.Size.DeepCopy()
			c.SharedMemorySize = &q
		}
	}
	for _, vm := range s.VolumeMounts {
		if vm.UseAsCompilationCache {
			c.CompilationCache = &v1beta1.CompilationCacheConfig{PVCName: vm.Name, MountPath: vm.MountPoint}
			break
		}
	}
	if s.ScalingAdapter != nil && s.ScalingAdapter.Enabled {
		c.ScalingAdapter = &v1beta1.ScalingAdapter{}
	}
	gms, failover := withoutEnabled(s.GPUMemoryService), withoutEnabled(s.Failover)
	if gms != nil || failover != nil || s.Checkpoint != nil {
		c.Experimental = &v1beta1.ExperimentalSpec{GPUMemoryService: gms, Failover: failover, Checkpoint: s.Checkpoint.DeepCopy()}
	}
	c.PodTemplate = buildPodTemplate(s)
	if s.FrontendSidecar != nil {
		c.FrontendSidecar = ptrTo(v1beta1.DefaultFrontendSidecarName)
	}
	return c
}

// fromHubComponent converts one v1beta1 component to a v1alpha1 service (§2.3, beta to
// alpha), without any saved payload. The main container's env, resources and probes go
// to the dedicated v1alpha1 fields, as Dynamo's projection puts them; everything else of
// it stays in extraPodSpec.mainContainer. One difference from Dynamo's projection: the
// main container's volume mounts (but the compilation cache's) stay in
// extraPodSpec.mainContainer, where this operator renders them, instead of the flat
// v1alpha1 volumeMounts, which it keeps as given without rendering (DYNAMO.md: volumes
// reach pods through extraPodSpec).
func fromHubComponent(c *v1beta1.DynamoComponentDeploymentSharedSpec) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	s := &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ProviderOverride:       c.ProviderOverride.DeepCopy(),
		RuntimeVersionOverride: c.RuntimeVersionOverride,
		GlobalDynamoNamespace:  c.GlobalDynamoNamespace,
		Replicas:               clonePtr(c.Replicas),
		MinAvailable:           clonePtr(c.MinAvailable),
		Multinode:              c.Multinode.DeepCopy(),
		ModelRef:               c.ModelRef.DeepCopy(),
		EPPConfig:              c.EPPConfig.DeepCopy(),
		TopologyConstraint:     c.TopologyConstraint.DeepCopy(),
	}
	s.ComponentType, s.SubComponentType = spokeType(c.ComponentType)
	if q := c.SharedMemorySize; q != nil {
		if q.Sign() == 0 {
			s.SharedMemory = &v1alpha1.SharedMemorySpec{Disabled: true}
		} else {
			size := q.DeepCopy()
			s.SharedMemory = &v1alpha1.SharedMemorySpec{Size: &size}
		}
	}
	if cc := c.CompilationCache; cc != nil {
		s.VolumeMounts = []v1alpha1.VolumeMount{{Name: cc.PVCName, MountPoint: cc.MountPath, UseAsCompilationCache: true}}
	}
	if c.ScalingAdapter != nil {
		s.ScalingAdapter = &v1alpha1.ScalingAdapter{Enabled: true}
	}
	if e := c.Experimental; e != nil {
		s.GPUMemoryService, s.Failover, s.Checkpoint = withEnabled(e.GPUMemoryService), withEnabled(e.Failover), e.Checkpoint.DeepCopy()
	}
	decomposePodTemplate(c, s)
	return s
}

// hasPodTemplateContent reports whether a v1alpha1 service sets anything that lands in
// podTemplate (a compilation-cache mount alone does not: it is compilationCache).
func hasPodTemplateContent(s *v1alpha1.DynamoComponentDeploymentSharedSpec) bool {
	nonCacheMount := slices.ContainsFunc(s.VolumeMounts, func(vm v1alpha1.VolumeMount) bool { return !vm.UseAsCompilationCache })
	return s.Resources != nil || len(s.Envs) > 0 || s.EnvFromSecret != nil || nonCacheMount ||
		s.LivenessProbe != nil || s.ReadinessProbe != nil || !extraPodSpecIsZero(s.ExtraPodSpec) ||
		s.ExtraPodMetadata != nil || s.FrontendSidecar != nil
}

// buildPodTemplate composes podTemplate from v1alpha1's dedicated fields and
// extraPodSpec as Dynamo's conversion does: the main container is built from the
// dedicated fields, then extraPodSpec.mainContainer's set fields win over them, except
// env (dedicated first, then mainContainer's; mainContainer wins on a name), volume
// mounts (mainContainer's first, then the dedicated ones) and resources (merged by
// resource name, mainContainer's winning). Main comes first, then the other containers of
// extraPodSpec, then a frontend sidecar.
func buildPodTemplate(s *v1alpha1.DynamoComponentDeploymentSharedSpec) *corev1.PodTemplateSpec {
	if !hasPodTemplateContent(s) {
		return nil
	}
	t := &corev1.PodTemplateSpec{}
	if m := s.ExtraPodMetadata; m != nil {
		if len(m.Annotations) > 0 {
			t.Annotations = maps.Clone(m.Annotations)
		}
		if len(m.Labels) > 0 {
			t.Labels = maps.Clone(m.Labels)
		}
	}
	if s.ExtraPodSpec != nil && s.ExtraPodSpec.PodSpec != nil {
		t.Spec = *s.ExtraPodSpec.PodSpec.DeepCopy()
	}
	main := dedicatedMain(s)
	if s.ExtraPodSpec != nil && s.ExtraPodSpec.MainContainer != nil {
		mergeMain(&main, s.ExtraPodSpec.MainContainer)
	}
	main.Name = v1beta1.MainContainerName
	containers := []corev1.Container{main}
	for _, x := range t.Spec.Containers {
		if x.Name != v1beta1.MainContainerName {
			containers = append(containers, x)
		}
	}
	t.Spec.Containers = containers
	if fs := s.FrontendSidecar; fs != nil && !hasContainer(t.Spec.Containers, v1beta1.DefaultFrontendSidecarName) {
		x := corev1.Container{Name: v1beta1.DefaultFrontendSidecarName, Image: fs.Image, Args: slices.Clone(fs.Args), Env: slices.Clone(fs.Envs)}
		if fs.EnvFromSecret != nil && *fs.EnvFromSecret != "" {
			x.EnvFrom = []corev1.EnvFromSource{secretEnv(*fs.EnvFromSecret)}
		}
		t.Spec.Containers = append(t.Spec.Containers, x)
	}
	return t
}

// dedicatedMain is the main container of v1alpha1's dedicated fields.
func dedicatedMain(s *v1alpha1.DynamoComponentDeploymentSharedSpec) corev1.Container {
	m := corev1.Container{Name: v1beta1.MainContainerName, Env: slices.Clone(s.Envs)}
	if s.Resources != nil {
		m.Resources = resourcesToNative(s.Resources)
	}
	if s.EnvFromSecret != nil && *s.EnvFromSecret != "" {
		m.EnvFrom = []corev1.EnvFromSource{secretEnv(*s.EnvFromSecret)}
	}
	m.LivenessProbe, m.ReadinessProbe = s.LivenessProbe.DeepCopy(), s.ReadinessProbe.DeepCopy()
	for _, vm := range s.VolumeMounts {
		m.VolumeMounts = append(m.VolumeMounts, corev1.VolumeMount{Name: vm.Name, MountPath: vm.MountPoint})
	}
	return m
}

// mergeMain merges the user's mainContainer over base (see buildPodTemplate).
func mergeMain(base *corev1.Container, user *corev1.Container) {
	u := user.DeepCopy()
	env, mounts, res := base.Env, base.VolumeMounts, base.Resources
	bv, uv := reflect.ValueOf(base).Elem(), reflect.ValueOf(u).Elem()
	for i := range bv.NumField() {
		if f := uv.Field(i); !isEmpty(f) {
			bv.Field(i).Set(f)
		}
	}
	base.Env = v1alpha1.MergeEnv(env, u.Env)
	base.VolumeMounts = append(slices.Clone(u.VolumeMounts), mounts...)
	base.Resources = mergeResources(res, u.Resources)
}

// isEmpty is mergo's emptiness: zero, or a slice or map of length 0.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return v.IsZero()
}

// mergeResources merges user over base by resource name (user wins); user claims, when
// set, replace base's.
func mergeResources(base, user corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	for _, pair := range []struct {
		dst *corev1.ResourceList
		src corev1.ResourceList
	}{{&out.Limits, user.Limits}, {&out.Requests, user.Requests}} {
		for k, v := range pair.src {
			if *pair.dst == nil {
				*pair.dst = corev1.ResourceList{}
			}
			(*pair.dst)[k] = v.DeepCopy()
		}
	}
	if len(user.Claims) > 0 {
		out.Claims = slices.Clone(user.Claims)
	}
	return out
}

// decomposePodTemplate is buildPodTemplate's inverse without a payload: metadata labels
// and annotations to extraPodMetadata, the main container's env, resources and probes to
// the dedicated fields, its other fields to extraPodSpec.mainContainer, every other
// container and the pod's fields to extraPodSpec.
func decomposePodTemplate(c *v1beta1.DynamoComponentDeploymentSharedSpec, s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
	if c.PodTemplate == nil {
		return
	}
	t := c.PodTemplate.DeepCopy()
	if len(t.Annotations) > 0 || len(t.Labels) > 0 {
		s.ExtraPodMetadata = &v1alpha1.ExtraPodMetadata{Annotations: maps.Clone(t.Annotations), Labels: maps.Clone(t.Labels)}
	}
	var main *corev1.Container
	var others []corev1.Container
	for i := range t.Spec.Containers {
		if t.Spec.Containers[i].Name == v1beta1.MainContainerName && main == nil {
			main = &t.Spec.Containers[i]
			continue
		}
		others = append(others, t.Spec.Containers[i])
	}
	if main != nil {
		if r := resourcesFromNative(main.Resources); r != nil {
			s.Resources = r
			main.Resources = corev1.ResourceRequirements{}
		}
		if len(main.Env) > 0 {
			s.Envs, main.Env = main.Env, nil
		}
		s.LivenessProbe, s.ReadinessProbe = main.LivenessProbe, main.ReadinessProbe
		main.LivenessProbe, main.ReadinessProbe = nil, nil
		if cc := c.CompilationCache; cc != nil {
			if i := slices.IndexFunc(main.VolumeMounts, func(m corev1.VolumeMount) bool {
				return apiequality.Semantic.DeepEqual(m, corev1.VolumeMount{Name: cc.PVCName, MountPath: cc.MountPath})
			}); i >= 0 {
				main.VolumeMounts = slices.Delete(main.VolumeMounts, i, i+1)
			}
		}
		main.Name = ""
		if containerIsEmpty(main) {
			main = nil
		}
	}
	spec := t.Spec
	spec.Containers = others
	if !podSpecIsZero(&spec) || main != nil {
		eps := &v1alpha1.ExtraPodSpec{MainContainer: main}
		if !podSpecIsZero(&spec) {
			eps.PodSpec = &spec
		}
		s.ExtraPodSpec = eps
	}
}

// resourcesToNative is Dynamo's: cpu and memory by name, gpu as gpuType (or
// nvidia.com/gpu), custom keys as given; values that do not parse are dropped.
func resourcesToNative(r *v1alpha1.Resources) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: itemToList(r.Requests), Limits: itemToList(r.Limits), Claims: slices.Clone(r.Claims)}
}

func itemToList(item *v1alpha1.ResourceItem) corev1.ResourceList {
	if item == nil {
		return nil
	}
	out := corev1.ResourceList{}
	put := func(name corev1.ResourceName, v string) {
		if v == "" {
			return
		}
		if q, err := resource.ParseQuantity(v); err == nil {
			out[name] = q
		}
	}
	put(corev1.ResourceCPU, item.CPU)
	put(corev1.ResourceMemory, item.Memory)
	gpu := resourceGPU
	if item.GPUType != "" {
		gpu = corev1.ResourceName(item.GPUType)
	}
	put(gpu, item.GPU)
	for k, v := range item.Custom {
		put(corev1.ResourceName(k), v)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// resourcesFromNative is Dynamo's inverse: cpu, memory, nvidia.com/gpu as gpu, every
// other name as custom (a gpuType comes back as custom).
func resourcesFromNative(r corev1.ResourceRequirements) *v1alpha1.Resources {
	out := &v1alpha1.Resources{Requests: listToItem(r.Requests), Limits: listToItem(r.Limits), Claims: slices.Clone(r.Claims)}
	if out.Requests == nil && out.Limits == nil && len(out.Claims) == 0 {
		return nil
	}
	return out
}

func listToItem(list corev1.ResourceList) *v1alpha1.ResourceItem {
	if len(list) == 0 {
		return nil
	}
	out := &v1alpha1.ResourceItem{}
	for name, q := range list {
		switch v := q.String(); name {
		case corev1.ResourceCPU:
			out.CPU = v
		case corev1.ResourceMemory:
			out.Memory = v
		case resourceGPU:
			out.GPU = v
		default:
			if out.Custom == nil {
				out.Custom = map[string]string{}
			}
			out.Custom[string(name)] = v
		}
	}
	return out
}

// withoutEnabled is the v1beta1 form of an enabled v1alpha1 feature switch ({enabled:
// true, ...} without enabled); nil when it is absent or not enabled (v1beta1 has no
// disabled form: the v1alpha1 value is saved).
func withoutEnabled(r *v1alpha1.Raw) *v1alpha1.Raw {
	m, ok := rawObject(r)
	if !ok || m["enabled"] != true {
		return nil
	}
	delete(m, "enabled")
	return objectRaw(m)
}

// withEnabled is the v1alpha1 form of a v1beta1 feature block: enabled set to true.
func withEnabled(r *v1alpha1.Raw) *v1alpha1.Raw {
	if r == nil {
		return nil
	}
	m, ok := rawObject(r)
	if !ok {
		m = map[string]any{}
	}
	m["enabled"] = true
	return objectRaw(m)
}

func rawObject(r *v1alpha1.Raw) (map[string]any, bool) {
	if r == nil || len(r.Raw) == 0 {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(r.Raw, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

func objectRaw(m map[string]any) *v1alpha1.Raw {
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return &v1alpha1.Raw{RawExtension: runtime.RawExtension{Raw: b}}
}

func secretEnv(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func hasContainer(cs []corev1.Container, name string) bool {
	return slices.ContainsFunc(cs, func(c corev1.Container) bool { return c.Name == name })
}

func containerIsEmpty(c *corev1.Container) bool {
	return c == nil || apiequality.Semantic.DeepEqual(*c, corev1.Container{})
}

func podSpecIsZero(p *corev1.PodSpec) bool {
	return p == nil || apiequality.Semantic.DeepEqual(*p, corev1.PodSpec{})
}

func extraPodSpecIsZero(e *v1alpha1.ExtraPodSpec) bool {
	return e == nil || podSpecIsZero(e.PodSpec) && containerIsEmpty(e.MainContainer)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func ptrTo[T any](v T) *T { return &v }
