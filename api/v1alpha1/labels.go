package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels on every object the operator creates for a DGD (workloads, pod templates,
// ControllerRevisions). Selecting by LabelGraph finds everything of one DGD.
const (
	// LabelGraph is the DGD name.
	LabelGraph = "nvidia.com/dynamo-graph-deployment-name"
	// LabelService is the service name as written in spec.services.
	LabelService = "nvidia.com/dynamo-component"
	// LabelComponentType is the service's componentType.
	LabelComponentType = "nvidia.com/dynamo-component-type"
	// LabelWorkerHash is the worker revision hash; absent on stable (non-worker) workloads.
	LabelWorkerHash = "nvidia.com/dynamo-worker-hash"
	// LabelTrafficProxy ("true") marks the traffic proxy's pods and Deployment
	// (traffic/proxy): they carry LabelGraph and LabelService (the frontend they serve)
	// but are none of the service's workloads or pods.
	LabelTrafficProxy = "nvidia.com/dgd-rollout-proxy"
	// LabelManagedBy is set to ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue marks objects this operator owns.
	ManagedByValue = "dgd-rollout"
)

// Environment variables that isolate worker revisions (ROLLOUT.md "Workloads").
const (
	EnvDynNamespace             = "DYN_NAMESPACE"
	EnvDynNamespaceWorkerSuffix = "DYN_NAMESPACE_WORKER_SUFFIX"
	EnvDynNamespacePrefix       = "DYN_NAMESPACE_PREFIX"
)

// AnnotationPromote ends steps of a stepped rollout early ("kubectl dgd rollout
// promote"): "<revision>/<step>" ends the steps up to that one (numbered from 1, as
// status messages number them) of the rollout to that revision number (a pause without
// a duration waits for it), "<revision>/full" skips every remaining step. A value
// naming another revision does nothing.
const AnnotationPromote = "nvidia.com/rollout-promote"

// AnnotationAbort aborts the rollout to a revision ("kubectl dgd rollout abort"):
// "<revision>/<attempt>" (status.updateRevisionNumber and
// status.rollingUpdate.attempt) returns every worker to the stable revision. A value
// naming another revision or attempt does nothing, so it never reaches a later rollout
// or a retried one.
const AnnotationAbort = "nvidia.com/rollout-abort"

// AnnotationRetry starts an aborted rollout again from its first step ("kubectl dgd
// rollout retry"): "<revision>/<attempt>" names the aborted attempt; the next attempt
// starts. A value naming another revision or attempt does nothing.
const AnnotationRetry = "nvidia.com/rollout-retry"

// AttemptTag is the value of AnnotationAbort and AnnotationRetry that names attempt
// (status.rollingUpdate.attempt; 0 reads as 1) of the rollout to revision.
func AttemptTag(revision int64, attempt int32) string {
	return fmt.Sprintf("%d/%d", revision, max(attempt, 1))
}

// AnnotationChangeCause records why a revision was made, as kubectl does.
const AnnotationChangeCause = "kubernetes.io/change-cause"

// RuntimeNamespaceBase is <k8s-namespace>-<dgd-name>, the Dynamo namespace base.
func (d *DynamoGraphDeployment) RuntimeNamespaceBase() string {
	return d.Namespace + "-" + d.Name
}

// OwnerAPIVersion is the apiVersion of every owner reference to a DGD the operator
// writes: the storage version, v1beta1 (Dynamo deprecates v1alpha1, and a garbage
// collector cannot resolve an owner reference whose version is no longer served:
// it then deletes nothing the DGD owns). References an older operator wrote are moved
// over at start (backends.RelabelOwnedExcept).
const OwnerAPIVersion = "nvidia.com/v1beta1"

// ControllerRef is the owner reference that makes dgd the controller of an object
// (controllerutil.SetControllerReference's, under OwnerAPIVersion): Controller and
// BlockOwnerDeletion true.
func ControllerRef(dgd *DynamoGraphDeployment) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: OwnerAPIVersion, Kind: "DynamoGraphDeployment", Name: dgd.Name, UID: dgd.UID,
		Controller: &t, BlockOwnerDeletion: &t}
}

// OwnerRef is dgd as one of an object's owners, not its controller (an object shared
// with other DGDs).
func OwnerRef(dgd *DynamoGraphDeployment) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: OwnerAPIVersion, Kind: "DynamoGraphDeployment", Name: dgd.Name, UID: dgd.UID}
}

// SetController makes dgd the controller of obj (ControllerRef), as
// controllerutil.SetControllerReference does: an error when another object controls it,
// a reference to dgd of another version replaced.
func SetController(obj metav1.Object, dgd *DynamoGraphDeployment) error {
	if c := metav1.GetControllerOf(obj); c != nil && c.UID != dgd.UID {
		return fmt.Errorf("%s is already controlled by %s %s", obj.GetName(), c.Kind, c.Name)
	}
	refs := []metav1.OwnerReference{ControllerRef(dgd)}
	for _, r := range obj.GetOwnerReferences() {
		if r.UID != dgd.UID {
			refs = append(refs, r)
		}
	}
	obj.SetOwnerReferences(refs)
	return nil
}
