package harness

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
)

// DynamoScopeLease is Dynamo's namespace-scope Lease of ns as a user holds it to stop
// Dynamo's operator acting there (docs/moving-over.md): held a day from now.
func DynamoScopeLease(ns string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: decide.DynamoScopeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("moving-to-dgd-rollout"), LeaseDurationSeconds: ptr.To[int32](86400),
			RenewTime: &metav1.MicroTime{Time: time.Now()}}}
}

// NewDisaggregatedSetObject is an empty DisaggregatedSet (unstructured) to read into.
func NewDisaggregatedSetObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(disaggv1.GroupVersion.WithKind("DisaggregatedSet"))
	return u
}

// DynamoDisaggregatedSet is the DisaggregatedSet Dynamo's operator renders for dgd's
// multinode workers roles (ai-dynamo/dynamo deploy/operator/internal/controller
// dgd_disaggregatedset_workload_renderer.go Render, renderRole): named after the DGD,
// labelled with its graph and nvidia.com/selector, controlled by it (nvidia.com/v1beta1);
// a role per worker whose spec is a LeaderWorkerSet's (the component's replicas, size =
// node count, LeaderCreated, RollingUpdate, RecreateGroupOnPodRestart) with Dynamo's
// leader and worker pods (rendered for worker hash hash, without this operator's
// managed-by and selector labels). Unstructured, as Dynamo writes it.
func DynamoDisaggregatedSet(dgd *v1alpha1.DynamoGraphDeployment, hash string, roles ...string) (*unstructured.Unstructured, error) {
	u := NewDisaggregatedSetObject()
	u.SetNamespace(dgd.Namespace)
	u.SetName(dgd.Name)
	u.SetLabels(map[string]string{v1alpha1.LabelGraph: dgd.Name, "nvidia.com/selector": dgd.Name})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: dgd.Name,
		UID: dgd.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
	var out []any
	for _, name := range roles {
		spec, err := dynamoRoleSpec(render.Component{DGD: dgd, Name: name, Spec: dgd.Spec.Services[name], Hash: hash})
		if err != nil {
			return nil, err
		}
		out = append(out, map[string]any{"name": name, "spec": spec})
	}
	u.Object["spec"] = map[string]any{"roles": out}
	return u, nil
}

// dynamoRoleSpec is one role's LeaderWorkerSet spec of DynamoDisaggregatedSet.
func dynamoRoleSpec(comp render.Component) (map[string]any, error) {
	var tmpls [2]corev1.PodTemplateSpec
	for i, role := range []render.Role{render.RoleLeader, render.RoleWorker} {
		t, err := comp.Pod(role, render.LWS{})
		if err != nil {
			return nil, err
		}
		delete(t.Labels, v1alpha1.LabelManagedBy)
		delete(t.Labels, render.LabelSelector)
		tmpls[i] = t
	}
	spec := lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To(comp.Spec.DesiredReplicas()), StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
		RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
		LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{LeaderTemplate: &tmpls[0], WorkerTemplate: tmpls[1],
			Size: ptr.To(comp.Spec.NodeCount()), RestartPolicy: lwsv1.RecreateGroupOnPodRestart}}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
}
