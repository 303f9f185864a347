package conversion

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
)

// ToHub converts a v1alpha1 DGD into v1beta1 (Dynamo's ConvertTo). What v1beta1 cannot
// hold is saved in the nvidia.com/dgd-spec annotation of dst as a sparse v1alpha1 spec;
// a v1beta1 payload on src (written by FromHub) puts back what v1alpha1 could not hold.
func ToHub(src *v1alpha1.DynamoGraphDeployment, dst *v1beta1.DynamoGraphDeployment) error {
	dst.TypeMeta.APIVersion, dst.TypeMeta.Kind = v1beta1.GroupVersion.String(), "DynamoGraphDeployment"
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var hub v1beta1.DynamoGraphDeploymentSpec
	hubOrigin := unmarshalPayload(src.Annotations[AnnotationSpec], &hub)
	deleteAnnotation(&dst.ObjectMeta.Annotations, AnnotationSpec)

	in, out := &src.Spec, &dst.Spec
	*out = v1beta1.DynamoGraphDeploymentSpec{
		ProviderOverride: in.ProviderOverride.DeepCopy(), Annotations: maps.Clone(in.Annotations), Labels: maps.Clone(in.Labels),
		PriorityClassName: in.PriorityClassName, BackendFramework: in.BackendFramework, Restart: in.Restart.DeepCopy(),
		Experimental: in.Experimental.DeepCopy(), Env: slices.Clone(in.Envs),
		Backend: in.Backend, Rollout: in.Rollout.DeepCopy(), RevisionHistoryLimit: clonePtr(in.RevisionHistoryLimit),
	}
	if t := in.TopologyConstraint; t != nil {
		out.TopologyConstraint = &v1beta1.SpecTopologyConstraint{ClusterTopologyName: t.TopologyProfile, PackDomain: t.PackDomain}
	}
	save := v1alpha1.DynamoGraphDeploymentSpec{PVCs: slices.Clone(in.PVCs), DynamoGraph: in.DynamoGraph}
	for _, name := range emissionOrder(in.Services, hubOrigin, hub.Components) {
		s := in.Services[name]
		if s == nil {
			setService(&save.Services, name, nil)
			continue
		}
		c := toHubComponent(name, s)
		if saved := componentNamed(hub.Components, name); saved != nil {
			c = restoreHub(c, s, saved)
		}
		if !equal(fromHubComponent(&c), s) {
			setService(&save.Services, name, s.DeepCopy())
		}
		out.Components = append(out.Components, c)
	}
	if !equal(save, v1alpha1.DynamoGraphDeploymentSpec{}) {
		payload, err := marshalPayload(&save)
		if err != nil {
			return err
		}
		setAnnotation(&dst.ObjectMeta.Annotations, AnnotationSpec, payload)
	}
	statusToHub(&src.Status, &dst.Status)
	return nil
}

// FromHub converts a v1beta1 DGD into v1alpha1 (Dynamo's ConvertFrom). A v1alpha1
// payload on src (written by ToHub, or by Dynamo's operator) puts back what v1beta1
// could not hold; what v1alpha1 cannot hold is saved in dst's nvidia.com/dgd-spec as a
// sparse v1beta1 spec.
func FromHub(src *v1beta1.DynamoGraphDeployment, dst *v1alpha1.DynamoGraphDeployment) error {
	dst.TypeMeta.APIVersion, dst.TypeMeta.Kind = v1alpha1.GroupVersion.String(), "DynamoGraphDeployment"
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	var spoke v1alpha1.DynamoGraphDeploymentSpec
	unmarshalPayload(src.Annotations[AnnotationSpec], &spoke)
	deleteAnnotation(&dst.ObjectMeta.Annotations, AnnotationSpec)

	in, out := &src.Spec, &dst.Spec
	*out = v1alpha1.DynamoGraphDeploymentSpec{
		ProviderOverride: in.ProviderOverride.DeepCopy(), Annotations: maps.Clone(in.Annotations), Labels: maps.Clone(in.Labels),
		PriorityClassName: in.PriorityClassName, BackendFramework: in.BackendFramework, Restart: in.Restart.DeepCopy(),
		Experimental: in.Experimental.DeepCopy(), Envs: slices.Clone(in.Env),
		Backend: in.Backend, Rollout: in.Rollout.DeepCopy(), RevisionHistoryLimit: clonePtr(in.RevisionHistoryLimit),
		PVCs: slices.Clone(spoke.PVCs), DynamoGraph: spoke.DynamoGraph,
	}
	if t := in.TopologyConstraint; t != nil {
		out.TopologyConstraint = &v1alpha1.SpecTopologyConstraint{TopologyProfile: t.ClusterTopologyName, PackDomain: t.PackDomain}
	}
	save, err := servicesFromHub(in.Components, &spoke, out)
	if err != nil {
		return err
	}
	if !equal(save, v1beta1.DynamoGraphDeploymentSpec{}) {
		payload, err := marshalPayload(&save)
		if err != nil {
			return err
		}
		setAnnotation(&dst.ObjectMeta.Annotations, AnnotationSpec, payload)
	}
	statusFromHub(&src.Status, &dst.Status)
	return nil
}

// servicesFromHub converts v1beta1's components into out's services, with what the
// v1alpha1 payload spoke saved put back, and returns the sparse v1beta1 spec of what
// v1alpha1 cannot hold (a component's fields, or the components' order).
func servicesFromHub(components []v1beta1.DynamoComponentDeploymentSharedSpec, spoke *v1alpha1.DynamoGraphDeploymentSpec,
	out *v1alpha1.DynamoGraphDeploymentSpec) (v1beta1.DynamoGraphDeploymentSpec, error) {
	keepOrder := !sort.SliceIsSorted(components, func(i, j int) bool { return components[i].ComponentName < components[j].ComponentName })
	var save v1beta1.DynamoGraphDeploymentSpec
	for i := range components {
		c := &components[i]
		if _, dup := out.Services[c.ComponentName]; dup {
			return save, fmt.Errorf("duplicate component name %q in spec.components", c.ComponentName)
		}
		s := fromHubComponent(c)
		if saved := spoke.Services[c.ComponentName]; saved != nil {
			s = restoreSpoke(s, c, saved)
		}
		switch {
		case !equal(toHubComponent(c.ComponentName, s), *c):
			save.Components = append(save.Components, *c.DeepCopy())
		case keepOrder:
			save.Components = append(save.Components, v1beta1.DynamoComponentDeploymentSharedSpec{ComponentName: c.ComponentName})
		}
		setService(&out.Services, c.ComponentName, s)
	}
	for name, saved := range spoke.Services {
		if _, ok := out.Services[name]; !ok && saved == nil {
			setService(&out.Services, name, nil)
		}
	}
	return save, nil
}

// emissionOrder is the order of v1beta1's components: by name, unless a v1beta1 payload
// kept another order (its names first, then the others by name), as Dynamo's.
func emissionOrder(services map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec, hubOrigin bool, saved []v1beta1.DynamoComponentDeploymentSharedSpec) []string {
	names := slices.Sorted(maps.Keys(services))
	if !hubOrigin || sort.SliceIsSorted(saved, func(i, j int) bool { return saved[i].ComponentName < saved[j].ComponentName }) {
		return names
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range saved {
		if _, ok := services[c.ComponentName]; ok && !seen[c.ComponentName] {
			seen[c.ComponentName] = true
			out = append(out, c.ComponentName)
		}
	}
	for _, n := range names {
		if !seen[n] {
			out = append(out, n)
		}
	}
	return out
}

// restoreHub puts back a v1beta1 component saved by FromHub: whole when the live
// v1alpha1 service still is what that component converts to (nothing was changed
// through v1alpha1); otherwise the live service wins and only the v1beta1-only leaves
// that still fit come back (the frontendSidecar reference, experimental.grove).
func restoreHub(c v1beta1.DynamoComponentDeploymentSharedSpec, live *v1alpha1.DynamoComponentDeploymentSharedSpec, saved *v1beta1.DynamoComponentDeploymentSharedSpec) v1beta1.DynamoComponentDeploymentSharedSpec {
	if equal(fromHubComponent(saved), live) {
		out := *saved.DeepCopy()
		out.ComponentName = c.ComponentName
		return out
	}
	if c.FrontendSidecar == nil && saved.FrontendSidecar != nil && c.PodTemplate != nil && hasContainer(c.PodTemplate.Spec.Containers, *saved.FrontendSidecar) {
		c.FrontendSidecar = ptrTo(*saved.FrontendSidecar)
	}
	if saved.Experimental != nil && saved.Experimental.Grove != nil {
		if c.Experimental == nil {
			c.Experimental = &v1beta1.ExperimentalSpec{}
		}
		if c.Experimental.Grove == nil {
			c.Experimental.Grove = saved.Experimental.Grove.DeepCopy()
		}
	}
	return c
}

// restoreSpoke puts back a v1alpha1 service saved by ToHub (or Dynamo's operator):
// whole when the live v1beta1 component still is what that service converts to;
// otherwise the live component wins, and Dynamo's rules bring back what still fits: the
// v1alpha1-only fields (annotations, labels, ingress, dynamoNamespace, autoscaling...),
// which dedicated field or extraPodSpec.mainContainer each main-container value came
// from (where the live merged value is unchanged), odd sharedMemory shapes, disabled
// switches, and the frontend sidecar.
func restoreSpoke(s *v1alpha1.DynamoComponentDeploymentSharedSpec, live *v1beta1.DynamoComponentDeploymentSharedSpec, saved *v1alpha1.DynamoComponentDeploymentSharedSpec) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	if equal(toHubComponent(live.ComponentName, saved), *live) {
		return saved.DeepCopy()
	}
	restoreAlphaOnly(s, saved, live.ComponentName)
	if live.PodTemplate != nil && hasContainer(live.PodTemplate.Spec.Containers, v1beta1.MainContainerName) {
		restoreOrigins(s, saved)
	}
	restoreShapes(s, saved)
	restoreFrontendSidecar(s, live, saved)
	if s.ExtraPodSpec != nil && containerIsEmpty(s.ExtraPodSpec.MainContainer) {
		s.ExtraPodSpec.MainContainer = nil
	}
	if s.ExtraPodSpec != nil && extraPodSpecIsZero(s.ExtraPodSpec) && !(saved.ExtraPodSpec != nil && extraPodSpecIsZero(saved.ExtraPodSpec)) {
		s.ExtraPodSpec = nil
	}
	return s
}

// restoreAlphaOnly brings back the fields v1beta1 has no place for.
func restoreAlphaOnly(s, saved *v1alpha1.DynamoComponentDeploymentSharedSpec, name string) {
	if s.SubComponentType == "" && !promotesSubType(saved) {
		s.SubComponentType = saved.SubComponentType
	}
	if saved.ServiceName != name {
		s.ServiceName = saved.ServiceName
	}
	if s.DynamoNamespace == nil {
		s.DynamoNamespace = clonePtr(saved.DynamoNamespace)
	}
	if s.Autoscaling == nil {
		s.Autoscaling = saved.Autoscaling.DeepCopy()
	}
	if s.Ingress == nil {
		s.Ingress = saved.Ingress.DeepCopy()
	}
	if s.PVC == nil {
		s.PVC = saved.PVC.DeepCopy()
	}
	if s.CompilationCache == nil {
		s.CompilationCache = saved.CompilationCache.DeepCopy()
	}
	if len(s.Annotations) == 0 {
		s.Annotations = maps.Clone(saved.Annotations)
	}
	if len(s.Labels) == 0 {
		s.Labels = maps.Clone(saved.Labels)
	}
}

// semanticMain is the main container a v1alpha1 service's dedicated fields and
// mainContainer make together (buildPodTemplate's).
func semanticMain(s *v1alpha1.DynamoComponentDeploymentSharedSpec) corev1.Container {
	m := dedicatedMain(s)
	if s.ExtraPodSpec != nil && s.ExtraPodSpec.MainContainer != nil {
		mergeMain(&m, s.ExtraPodSpec.MainContainer)
	}
	return m
}

// restoreOrigins puts env, envFrom, resources, volume mounts and probes back in the
// v1alpha1 field they came from (dedicated or extraPodSpec.mainContainer), each where the
// live merged value is still the saved one (Dynamo's restoreMainContainerFieldOrigins).
func restoreOrigins(s, saved *v1alpha1.DynamoComponentDeploymentSharedSpec) {
	cur, old := semanticMain(s), semanticMain(saved)
	savedMain := &corev1.Container{}
	if saved.ExtraPodSpec != nil && saved.ExtraPodSpec.MainContainer != nil {
		savedMain = saved.ExtraPodSpec.MainContainer
	}
	mc := func() *corev1.Container {
		if s.ExtraPodSpec == nil {
			s.ExtraPodSpec = &v1alpha1.ExtraPodSpec{}
		}
		if s.ExtraPodSpec.MainContainer == nil {
			s.ExtraPodSpec.MainContainer = &corev1.Container{}
		}
		return s.ExtraPodSpec.MainContainer
	}
	if equal(cur.Env, old.Env) && (len(saved.Envs) > 0 || len(savedMain.Env) > 0) {
		s.Envs, mc().Env = slices.Clone(saved.Envs), slices.Clone(savedMain.Env)
	}
	if equal(cur.EnvFrom, old.EnvFrom) && (saved.EnvFromSecret != nil || len(savedMain.EnvFrom) > 0) {
		s.EnvFromSecret, mc().EnvFrom = clonePtr(saved.EnvFromSecret), slices.Clone(savedMain.EnvFrom)
	}
	if equal(cur.Resources, old.Resources) && (saved.Resources != nil || !equal(savedMain.Resources, corev1.ResourceRequirements{})) {
		s.Resources, mc().Resources = saved.Resources.DeepCopy(), *savedMain.Resources.DeepCopy()
	}
	if equal(cur.VolumeMounts, old.VolumeMounts) && (len(saved.VolumeMounts) > 0 || len(savedMain.VolumeMounts) > 0) {
		s.VolumeMounts, mc().VolumeMounts = slices.Clone(saved.VolumeMounts), slices.Clone(savedMain.VolumeMounts)
	}
	if equal(cur.LivenessProbe, old.LivenessProbe) && (saved.LivenessProbe != nil || savedMain.LivenessProbe != nil) {
		s.LivenessProbe, mc().LivenessProbe = saved.LivenessProbe.DeepCopy(), savedMain.LivenessProbe.DeepCopy()
	}
	if equal(cur.ReadinessProbe, old.ReadinessProbe) && (saved.ReadinessProbe != nil || savedMain.ReadinessProbe != nil) {
		s.ReadinessProbe, mc().ReadinessProbe = saved.ReadinessProbe.DeepCopy(), savedMain.ReadinessProbe.DeepCopy()
	}
	if savedMain.Name != "" && s.ExtraPodSpec != nil && s.ExtraPodSpec.MainContainer != nil {
		s.ExtraPodSpec.MainContainer.Name = savedMain.Name
	}
}

// restoreShapes brings back v1alpha1 shapes v1beta1 writes one way: sharedMemory
// {disabled, size} combinations, resources that do not survive Dynamo's resource
// mapping, empty extraPodMetadata and extraPodSpec, and disabled switches.
func restoreShapes(s, saved *v1alpha1.DynamoComponentDeploymentSharedSpec) {
	if shm := saved.SharedMemory; shm != nil {
		zero := shm.Size == nil || shm.Size.IsZero()
		switch {
		case shm.Disabled && !zero && s.SharedMemory != nil && s.SharedMemory.Disabled,
			!shm.Disabled && zero && s.SharedMemory == nil:
			s.SharedMemory = shm.DeepCopy()
		}
	}
	if r := saved.Resources; r != nil && !equal(resourcesFromNative(resourcesToNative(r)), r) &&
		equal(resourcesToNative(r), semanticMain(s).Resources) && (saved.ExtraPodSpec == nil || saved.ExtraPodSpec.MainContainer == nil) {
		s.Resources = r.DeepCopy()
		if s.ExtraPodSpec != nil && s.ExtraPodSpec.MainContainer != nil {
			s.ExtraPodSpec.MainContainer.Resources = corev1.ResourceRequirements{}
		}
	}
	if m := saved.ExtraPodMetadata; m != nil && s.ExtraPodMetadata == nil && len(m.Annotations) == 0 && len(m.Labels) == 0 {
		s.ExtraPodMetadata = m.DeepCopy()
	}
	if saved.ExtraPodSpec != nil && extraPodSpecIsZero(saved.ExtraPodSpec) && s.ExtraPodSpec == nil {
		s.ExtraPodSpec = saved.ExtraPodSpec.DeepCopy()
	}
	if s.ScalingAdapter == nil && saved.ScalingAdapter != nil && !saved.ScalingAdapter.Enabled {
		s.ScalingAdapter = saved.ScalingAdapter.DeepCopy()
	}
	if s.GPUMemoryService == nil && saved.GPUMemoryService != nil && withoutEnabled(saved.GPUMemoryService) == nil {
		s.GPUMemoryService = saved.GPUMemoryService.DeepCopy()
	}
	if s.Failover == nil && saved.Failover != nil && withoutEnabled(saved.Failover) == nil {
		s.Failover = saved.Failover.DeepCopy()
	}
}

// restoreFrontendSidecar turns the live sidecar-frontend container back into v1alpha1's
// frontendSidecar when the service had one: image, args, env and the secret from the
// live container, the rest from the saved one.
func restoreFrontendSidecar(s *v1alpha1.DynamoComponentDeploymentSharedSpec, live *v1beta1.DynamoComponentDeploymentSharedSpec, saved *v1alpha1.DynamoComponentDeploymentSharedSpec) {
	if saved.FrontendSidecar == nil || live.FrontendSidecar == nil || *live.FrontendSidecar != v1beta1.DefaultFrontendSidecarName {
		return
	}
	fs := saved.FrontendSidecar.DeepCopy()
	if s.ExtraPodSpec != nil && s.ExtraPodSpec.PodSpec != nil {
		cs := s.ExtraPodSpec.PodSpec.Containers
		if i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == v1beta1.DefaultFrontendSidecarName }); i >= 0 {
			x := cs[i]
			fs.Image, fs.Args, fs.Envs = x.Image, slices.Clone(x.Args), slices.Clone(x.Env)
			if len(x.EnvFrom) == 1 && x.EnvFrom[0].SecretRef != nil && x.EnvFrom[0].Prefix == "" && x.EnvFrom[0].ConfigMapRef == nil {
				fs.EnvFromSecret = ptrTo(x.EnvFrom[0].SecretRef.Name)
			} else if fs.EnvFromSecret == nil || *fs.EnvFromSecret != "" {
				fs.EnvFromSecret = nil
			}
			s.ExtraPodSpec.PodSpec.Containers = slices.Delete(slices.Clone(cs), i, i+1)
			if podSpecIsZero(s.ExtraPodSpec.PodSpec) {
				s.ExtraPodSpec.PodSpec = nil
			}
		}
	}
	s.FrontendSidecar = fs
}

// statusToHub and statusFromHub copy this operator's status, which both versions hold
// whole (Dynamo's renames: services to components, updatedServices to
// updatedComponents).
func statusToHub(in *v1alpha1.DynamoGraphDeploymentStatus, out *v1beta1.DynamoGraphDeploymentStatus) {
	*out = v1beta1.DynamoGraphDeploymentStatus{
		ObservedGeneration: in.ObservedGeneration, Conditions: slices.Clone(in.Conditions),
		CurrentRevision: in.CurrentRevision, UpdateRevision: in.UpdateRevision, UpdateWorkerHash: in.UpdateWorkerHash,
		UpdateRevisionNumber: in.UpdateRevisionNumber, CollisionCount: clonePtr(in.CollisionCount),
		Replicas: in.Replicas, ReadyReplicas: in.ReadyReplicas, UpdatedReplicas: in.UpdatedReplicas,
		AvailableReplicas: in.AvailableReplicas, UpdatedReadyReplicas: in.UpdatedReadyReplicas, Ready: in.Ready,
		Restart: in.Restart.DeepCopy(), Traffic: in.Traffic.DeepCopy(), Cohorts: cloneCohorts(in.Cohorts),
	}
	for k, v := range in.Services {
		if out.Components == nil {
			out.Components = map[string]v1alpha1.ServiceStatus{}
		}
		out.Components[k] = *v.DeepCopy()
	}
	if r := in.RollingUpdate.DeepCopy(); r != nil {
		out.RollingUpdate = &v1beta1.RollingUpdateStatus{Phase: r.Phase, Reason: r.Reason, Message: r.Message,
			StartTime: r.StartTime, EndTime: r.EndTime, LastProgressTime: r.LastProgressTime, UpdatedComponents: r.UpdatedServices,
			CurrentStepIndex: r.CurrentStepIndex, CurrentStepStartTime: r.CurrentStepStartTime, CurrentStepKind: r.CurrentStepKind,
			CurrentStepEndTime: r.CurrentStepEndTime, Attempt: r.Attempt, Analyses: r.Analyses, Abort: r.Abort}
	}
}

func statusFromHub(in *v1beta1.DynamoGraphDeploymentStatus, out *v1alpha1.DynamoGraphDeploymentStatus) {
	*out = v1alpha1.DynamoGraphDeploymentStatus{
		ObservedGeneration: in.ObservedGeneration, Conditions: slices.Clone(in.Conditions),
		CurrentRevision: in.CurrentRevision, UpdateRevision: in.UpdateRevision, UpdateWorkerHash: in.UpdateWorkerHash,
		UpdateRevisionNumber: in.UpdateRevisionNumber, CollisionCount: clonePtr(in.CollisionCount),
		Replicas: in.Replicas, ReadyReplicas: in.ReadyReplicas, UpdatedReplicas: in.UpdatedReplicas,
		AvailableReplicas: in.AvailableReplicas, UpdatedReadyReplicas: in.UpdatedReadyReplicas, Ready: in.Ready,
		Restart: in.Restart.DeepCopy(), Traffic: in.Traffic.DeepCopy(), Cohorts: cloneCohorts(in.Cohorts),
	}
	for k, v := range in.Components {
		if out.Services == nil {
			out.Services = map[string]v1alpha1.ServiceStatus{}
		}
		out.Services[k] = *v.DeepCopy()
	}
	if r := in.RollingUpdate.DeepCopy(); r != nil {
		out.RollingUpdate = &v1alpha1.RollingUpdateStatus{Phase: r.Phase, Reason: r.Reason, Message: r.Message,
			StartTime: r.StartTime, EndTime: r.EndTime, LastProgressTime: r.LastProgressTime, UpdatedServices: r.UpdatedComponents,
			CurrentStepIndex: r.CurrentStepIndex, CurrentStepStartTime: r.CurrentStepStartTime, CurrentStepKind: r.CurrentStepKind,
			CurrentStepEndTime: r.CurrentStepEndTime, Attempt: r.Attempt, Analyses: r.Analyses, Abort: r.Abort}
	}
}

func cloneCohorts(in []v1alpha1.CohortStatus) []v1alpha1.CohortStatus {
	if in == nil {
		return nil
	}
	out := make([]v1alpha1.CohortStatus, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func componentNamed(cs []v1beta1.DynamoComponentDeploymentSharedSpec, name string) *v1beta1.DynamoComponentDeploymentSharedSpec {
	for i := range cs {
		if cs[i].ComponentName == name {
			return &cs[i]
		}
	}
	return nil
}

func setService(m *map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec, name string, s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
	if *m == nil {
		*m = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{}
	}
	(*m)[name] = s
}

func setAnnotation(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

func deleteAnnotation(m *map[string]string, k string) {
	delete(*m, k)
	if len(*m) == 0 {
		*m = nil
	}
}

// equal is the API server's equality: quantities by value, nil and empty alike.
func equal(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }
