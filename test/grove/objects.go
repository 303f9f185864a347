package grove

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	groveconst "github.com/ai-dynamo/grove/operator/api/common/constants"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The objects below are what the Grove operator v0.1.0-alpha.12-rc1 (tag
// operator/v0.1.0-alpha.12-rc1 of github.com/ai-dynamo/grove, commit 19905d53) makes of
// a PodCliqueSet, with exactly the labels, env, hostname and subdomain it gives them
// (paths relative to operator/internal/controller/; PCSC, PCSGC and PCLQC are the
// PodCliqueSet, PodCliqueScalingGroup and PodClique controllers). The fake Grove of
// test/harness creates them; tests that need Grove's pods without an API server build
// them here. Owner references are left to the caller (Grove sets the controller
// reference: PodCliqueSet → standalone PodClique and PCSG, PCSG → its PodCliques,
// PodClique → pod).
//
// On every pod, that Grove sets (PCLQC/components/pod/pod.go buildResource):
//   - labels: app.kubernetes.io/managed-by=grove-operator and part-of=<pcs>, then the
//     PodClique's labels, then grove.io/podclique, grove.io/podcliqueset-replica-index,
//     grove.io/podgang and grove.io/podclique-pod-index (getLabels). There is no
//     group-wide pod index label (grove.io/podcliquescalinggroup-pod-index came after
//     this release, grove#755, unmerged at this tag);
//   - env, appended after the template's in every container and init container
//     (componentutils.AddEnvVarsToContainers appends): on a scaling group's PodClique
//     GROVE_PCSG_NAME (from the label grove.io/podcliquescalinggroup),
//     GROVE_PCSG_TEMPLATE_NUM_PODS and GROVE_PCSG_INDEX (from the label
//     grove.io/podcliquescalinggroup-replica-index) (PCSGC/components/podclique/podclique.go
//     addEnvironmentVariablesToPodContainerSpecs), then on the pod GROVE_PCS_NAME,
//     GROVE_PCS_INDEX, GROVE_PCLQ_NAME, GROVE_HEADLESS_SERVICE
//     (`<pcs>-<i>.<ns>.svc.cluster.local`) and GROVE_PCLQ_POD_INDEX (from the label
//     grove.io/podclique-pod-index) (pod.go addEnvironmentVariables). Being appended, none
//     of them is defined for a `$(VAR)` in the template's own env values (the kubelet
//     expands a reference only to a variable defined earlier in the list); command and
//     args see them all;
//   - hostname `<pclq>-<k>` and subdomain `<pcs>-<i>`, the replica's headless Service
//     (configurePodHostname); the scheduling gate grove.io/podgang-pending-creation; the
//     scheduler name of Grove's default backend, default-scheduler
//     (internal/scheduler/kube/backend.go PreparePod).
//
// Not built: the init container of startsAfter ordering (configurePodInitContainer)
// and resource claims.

// Replica is the PodCliqueSet replica these objects belong to: the operator's
// PodCliqueSets have one.
const Replica = 0

// SchedulingGate is the gate Grove creates every pod with and lifts once its PodGang is
// created (PCLQC/components/pod/pod.go podGangSchedulingGate).
const SchedulingGate = "grove.io/podgang-pending-creation"

// DefaultScheduler is the scheduler name Grove's default (kube) scheduler backend gives
// pods whose template names none.
const DefaultScheduler = "default-scheduler"

// StandalonePodClique is the PodClique `<pcs>-0-<clique>` of clique template t outside
// any scaling group (PCSC/components/podclique/podclique.go buildResource, getLabels):
// the template's labels overridden by Grove's, the template's spec (startsAfter, which
// Grove resolves to PodClique names, left out), no env of its own.
func StandalonePodClique(pcs *grovev1.PodCliqueSet, t *grovev1.PodCliqueTemplateSpec) *grovev1.PodClique {
	replica := apicommon.ResourceNameReplica{Name: pcs.Name, Replica: Replica}
	name := apicommon.GeneratePodCliqueName(replica, t.Name)
	spec := *t.Spec.DeepCopy()
	spec.StartsAfter = nil
	return &grovev1.PodClique{
		ObjectMeta: metav1.ObjectMeta{Namespace: pcs.Namespace, Name: name, Annotations: t.Annotations,
			Labels: cliqueLabels(pcs, t, map[string]string{
				apicommon.LabelAppNameKey:   name,
				apicommon.LabelComponentKey: apicommon.LabelComponentNamePodCliqueSetPodClique,
				apicommon.LabelPodGang:      apicommon.GenerateBasePodGangName(replica),
			}),
			Finalizers: []string{groveconst.FinalizerPodClique}},
		Spec: spec,
	}
}

// ScalingGroupPodClique is the PodClique `<pcsg>-<j>-<clique>` of clique template t in
// replica j of scaling group pcsg (PCSGC/components/podclique/podclique.go
// buildResource, getLabels, addEnvironmentVariablesToPodContainerSpecs): Grove's labels
// (the scaling group and its replica index among them) over the template's, and the
// template's containers and init containers with the group's GROVE_PCSG_* env appended.
// Replicas at and beyond the group's minAvailable are scaled PodGangs, labelled with
// their base PodGang.
func ScalingGroupPodClique(pcs *grovev1.PodCliqueSet, pcsg *grovev1.PodCliqueScalingGroup, j int, t *grovev1.PodCliqueTemplateSpec) *grovev1.PodClique {
	name := apicommon.GeneratePodCliqueName(apicommon.ResourceNameReplica{Name: pcsg.Name, Replica: j}, t.Name)
	extra := map[string]string{
		apicommon.LabelAppNameKey:                        name,
		apicommon.LabelComponentKey:                      apicommon.LabelComponentNamePodCliqueScalingGroupPodClique,
		apicommon.LabelPodCliqueScalingGroup:             pcsg.Name,
		apicommon.LabelPodGang:                           apicommon.GeneratePodGangNameForPodCliqueOwnedByPCSG(pcs, Replica, pcsg, j),
		apicommon.LabelPodCliqueScalingGroupReplicaIndex: strconv.Itoa(j),
	}
	if j >= int(ptr.Deref(pcsg.Spec.MinAvailable, 1)) {
		extra[apicommon.LabelBasePodGang] = apicommon.GenerateBasePodGangName(apicommon.ResourceNameReplica{Name: pcs.Name, Replica: Replica})
	}
	spec := *t.Spec.DeepCopy()
	spec.StartsAfter = nil
	env := []corev1.EnvVar{
		{Name: groveconst.EnvVarPodCliqueScalingGroupName, ValueFrom: labelRef(apicommon.LabelPodCliqueScalingGroup)},
		{Name: groveconst.EnvVarPodCliqueScalingGroupTemplateNumPods, Value: strconv.Itoa(templateNumPods(pcs, pcsg))},
		{Name: groveconst.EnvVarPodCliqueScalingGroupIndex, ValueFrom: labelRef(apicommon.LabelPodCliqueScalingGroupReplicaIndex)},
	}
	appendEnv(spec.PodSpec.Containers, env)
	appendEnv(spec.PodSpec.InitContainers, env)
	return &grovev1.PodClique{
		ObjectMeta: metav1.ObjectMeta{Namespace: pcs.Namespace, Name: name, Labels: cliqueLabels(pcs, t, extra),
			Annotations: t.Annotations, Finalizers: []string{groveconst.FinalizerPodClique}},
		Spec: spec,
	}
}

// templateNumPods is GROVE_PCSG_TEMPLATE_NUM_PODS: the template replicas of the group's
// cliques, summed (getPCSGTemplateNumPods).
func templateNumPods(pcs *grovev1.PodCliqueSet, pcsg *grovev1.PodCliqueScalingGroup) int {
	n := 0
	for _, name := range pcsg.Spec.CliqueNames {
		for _, t := range pcs.Spec.Template.Cliques {
			if t.Name == name {
				n += int(t.Spec.Replicas)
			}
		}
	}
	return n
}

// Pod is pod k (its hostname index) of PodClique pclq, as Grove's PodClique controller
// creates it (see above): generateName `<pclq>-`, the PodClique's annotations, labels
// and pod spec, Grove's pod env appended, hostname, subdomain, gate and scheduler.
func Pod(pcs *grovev1.PodCliqueSet, pclq *grovev1.PodClique, k int) *corev1.Pod {
	replica := apicommon.ResourceNameReplica{Name: pcs.Name, Replica: Replica}
	labels := apicommon.GetDefaultLabelsForPodCliqueSetManagedResources(pcs.Name)
	maps.Copy(labels, pclq.Labels)
	labels[apicommon.LabelPodClique] = pclq.Name
	labels[apicommon.LabelPodCliqueSetReplicaIndex] = strconv.Itoa(Replica)
	labels[apicommon.LabelPodGang] = pclq.Labels[apicommon.LabelPodGang]
	labels[apicommon.LabelPodCliquePodIndex] = strconv.Itoa(k)
	spec := *pclq.Spec.PodSpec.DeepCopy()
	spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: SchedulingGate}}
	if spec.SchedulerName == "" {
		spec.SchedulerName = DefaultScheduler
	}
	env := []corev1.EnvVar{
		{Name: groveconst.EnvVarPodCliqueSetName, Value: pcs.Name},
		{Name: groveconst.EnvVarPodCliqueSetIndex, Value: strconv.Itoa(Replica)},
		{Name: groveconst.EnvVarPodCliqueName, Value: pclq.Name},
		{Name: groveconst.EnvVarHeadlessService, Value: apicommon.GenerateHeadlessServiceAddress(replica, pclq.Namespace)},
		{Name: groveconst.EnvVarPodIndex, ValueFrom: labelRef(apicommon.LabelPodCliquePodIndex)},
	}
	appendEnv(spec.Containers, env)
	appendEnv(spec.InitContainers, env)
	spec.Hostname = fmt.Sprintf("%s-%d", pclq.Name, k)
	spec.Subdomain = apicommon.GenerateHeadlessServiceName(replica)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pclq.Namespace, GenerateName: pclq.Name + "-", Labels: labels,
			Annotations: maps.Clone(pclq.Annotations)},
		Spec: spec,
	}
}

// cliqueLabels are a PodClique's labels: the template's, overridden by Grove's default
// labels, extra, the replica index and the pod template hash.
func cliqueLabels(pcs *grovev1.PodCliqueSet, t *grovev1.PodCliqueTemplateSpec, extra map[string]string) map[string]string {
	out := maps.Clone(t.Labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, apicommon.GetDefaultLabelsForPodCliqueSetManagedResources(pcs.Name))
	maps.Copy(out, extra)
	out[apicommon.LabelPodCliqueSetReplicaIndex] = strconv.Itoa(Replica)
	out[apicommon.LabelPodTemplateHash] = PodTemplateHash(t)
	return out
}

// PodTemplateHash stands for Grove's per-clique pod template hash (the label
// grove.io/pod-template-hash, componentutils.ComputePCLQPodTemplateHash): a digest of
// the template's labels, annotations and pod spec, not its replicas. The value is not
// Grove's; only whether it changes matters.
func PodTemplateHash(t *grovev1.PodCliqueTemplateSpec) string {
	raw, _ := json.Marshal([]any{t.Labels, t.Annotations, t.Spec.PodSpec})
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return fmt.Sprintf("%x", h.Sum64())
}

func appendEnv(containers []corev1.Container, env []corev1.EnvVar) {
	for i := range containers {
		containers[i].Env = append(containers[i].Env, env...)
	}
}

func labelRef(key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", key)}}
}
