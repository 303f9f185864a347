package v1alpha1

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults applied when a field is unset (the CRD sets the same defaults at admission;
// these cover objects built in Go).
var (
	DefaultMaxSurge                = intstr.FromString("25%")
	DefaultMaxUnavailable          = intstr.FromString("25%")
	DefaultProgressDeadlineSeconds = int32(600)
	DefaultRevisionHistoryLimit    = int32(10)
)

// ServiceNames returns the service names in sorted order (map order is random).
func (d *DynamoGraphDeployment) ServiceNames() []string {
	names := make([]string, 0, len(d.Spec.Services))
	for n, s := range d.Spec.Services {
		if s != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// WorkerServiceNames returns the sorted names of the worker services.
func (d *DynamoGraphDeployment) WorkerServiceNames() []string {
	var names []string
	for _, n := range d.ServiceNames() {
		if d.Spec.Services[n].IsWorker() {
			names = append(names, n)
		}
	}
	return names
}

// RolloutOrDefault returns spec.rollout with defaults filled in (never nil).
func (d *DynamoGraphDeployment) RolloutOrDefault() RolloutSpec {
	r := RolloutSpec{}
	if d.Spec.Rollout != nil {
		r = *d.Spec.Rollout
	}
	if r.Strategy == "" {
		r.Strategy = RollingUpdateStrategy
	}
	if r.MaxSurge == nil {
		v := DefaultMaxSurge
		r.MaxSurge = &v
	}
	if r.MaxUnavailable == nil {
		v := DefaultMaxUnavailable
		r.MaxUnavailable = &v
	}
	if r.ProgressDeadlineSeconds == nil {
		v := DefaultProgressDeadlineSeconds
		r.ProgressDeadlineSeconds = &v
	}
	return r
}

// HistoryLimit returns spec.revisionHistoryLimit or its default.
func (d *DynamoGraphDeployment) HistoryLimit() int32 {
	if d.Spec.RevisionHistoryLimit == nil {
		return DefaultRevisionHistoryLimit
	}
	return *d.Spec.RevisionHistoryLimit
}

// BackendOrDefault returns spec.backend, Auto when unset.
func (d *DynamoGraphDeployment) BackendOrDefault() BackendType {
	if d.Spec.Backend == "" {
		return BackendAuto
	}
	return d.Spec.Backend
}

// ResourceGPU is what Dynamo's `gpu` resource means unless gpuType names another.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// MergeEnv concatenates env lists, a later variable replacing an earlier one of the same
// name in place, so the order of first appearance is kept (how Dynamo merges env, and
// render too).
func MergeEnv(lists ...[]corev1.EnvVar) []corev1.EnvVar {
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
