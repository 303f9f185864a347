package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Gang is how the pods of one multinode replica find each other on a workload kind: the
// leader's address and each pod's rank as command-line expressions the kubelet (or a
// shell) expands (Dynamo's MultinodeDeployer, lws.go and grove.go).
type Gang interface {
	// LeaderHost is the leader pod's address.
	LeaderHost() string
	// WorkerHost is the address of worker i (1..nodeCount-1).
	WorkerHost(i int) string
	// Rank is a worker pod's rank and whether it needs a shell to evaluate.
	Rank() (expr string, needsShell bool)
	// NeedsDNSWait: a leader must wait for its workers' DNS records (LWS creates them
	// with the pods; Grove's headless Service publishes not-ready addresses at once).
	NeedsDNSWait() bool
	// RoleLabels: the pods carry Dynamo's `role: leader|worker` label (LWS).
	RoleLabels() bool
	// aliases are the portable DYNAMO_LEADER_ADDRESS and DYNAMO_RANK variables of a role
	// that the pod's env can hold (after the variables they are built from), and
	// whether the member's shell must export DYNAMO_RANK instead (exportRank).
	aliases(role Role) (env []corev1.EnvVar, shellRank bool)
}

// Portable aliases of a gang's leader and rank (Dynamo consts: "multinode topology
// aliases are operator-owned and independent of the deployment provider").
const (
	EnvDynamoRank          = "DYNAMO_RANK"
	EnvDynamoLeaderAddress = "DYNAMO_LEADER_ADDRESS"
)

// LWS is a LeaderWorkerSet group. The LWS pod webhook puts LWS_LEADER_ADDRESS
// (`<lws>-<group>.<subdomain>.<namespace>`), LWS_GROUP_SIZE and LWS_WORKER_INDEX in
// front of every container's env (lws v0.9.0 pkg/utils/pod/pod_utils.go
// AddLWSVariables), so the kubelet expands references to them in ours.
type LWS struct{}

var _ Gang = LWS{}

// LeaderHost implements Gang.
func (LWS) LeaderHost() string { return "$(LWS_LEADER_ADDRESS)" }

// WorkerHost implements Gang: the leader's address with `-<i>` before its first dot
// (worker pods are `<leader>-<i>` in the same subdomain); needs a shell.
func (LWS) WorkerHost(i int) string {
	return fmt.Sprintf(`$(echo "$LWS_LEADER_ADDRESS" | sed 's/\./-%d\./')`, i)
}

// Rank implements Gang.
func (LWS) Rank() (string, bool) { return "$(LWS_WORKER_INDEX)", false }

// NeedsDNSWait implements Gang.
func (LWS) NeedsDNSWait() bool { return true }

// RoleLabels implements Gang.
func (LWS) RoleLabels() bool { return true }

func (LWS) aliases(Role) ([]corev1.EnvVar, bool) {
	return envs(EnvDynamoLeaderAddress, "$(LWS_LEADER_ADDRESS)", EnvDynamoRank, "$(LWS_WORKER_INDEX)"), false
}

// Grove is a PodCliqueScalingGroup replica: a leader clique `<Group>-ldr` of one pod and
// a worker clique `<Group>-wkr`, in PodCliqueSet PCS of namespace Namespace. Grove
// appends its GROVE_* variables after the template's env, so ours cannot reference
// them; the aliases read Grove's labels through the downward API instead.
type Grove struct {
	PCS, Group, Namespace string
}

var _ Gang = Grove{}

// Downward-API helpers for the Grove aliases, defined before DYNAMO_LEADER_ADDRESS
// (Grove's own GROVE_PCSG_NAME and GROVE_PCSG_INDEX read the same labels, but come
// after our env).
const (
	envGrovePCSGName  = "DYNAMO_GROVE_PCSG_NAME"
	envGrovePCSGIndex = "DYNAMO_GROVE_PCSG_INDEX"
)

// aliasEnv are the variables the multinode wiring owns: a user's value of one is
// replaced (Dynamo: "The operator owns these variables and replaces values with the
// same names from the component's podTemplate", docs "Portable Topology Environment
// Variables"), and ours come last, after the variables they are built from.
var aliasEnv = []string{envGrovePCSGName, envGrovePCSGIndex, EnvDynamoLeaderAddress, EnvDynamoRank}

// LeaderHost implements Gang: pod 0 of the gang's leader clique, in the PodCliqueSet's
// headless Service.
func (g Grove) LeaderHost() string {
	return fmt.Sprintf("$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-%s-ldr-0.$(GROVE_HEADLESS_SERVICE)", g.Group)
}

// WorkerHost implements Gang.
func (g Grove) WorkerHost(i int) string {
	return fmt.Sprintf("$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-%s-wkr-%d.$(GROVE_HEADLESS_SERVICE)", g.Group, i-1)
}

// Rank implements Gang: the worker clique's pod index plus one (the leader is 0).
func (Grove) Rank() (string, bool) { return "$((GROVE_PCLQ_POD_INDEX + 1))", true }

// NeedsDNSWait implements Gang.
func (Grove) NeedsDNSWait() bool { return false }

// RoleLabels implements Gang.
func (Grove) RoleLabels() bool { return false }

// aliases: DYNAMO_LEADER_ADDRESS on every member, built from the group's name and
// replica index (the labels grove.io/podcliquescalinggroup and -replica-index, which
// Grove puts on every pod of the group: ai-dynamo/grove operator/v0.1.0-alpha.12-rc1,
// internal/controller/podcliquescalinggroup/components/podclique/podclique.go getLabels,
// and podclique/components/pod/pod.go getLabels), read by downward-API variables defined
// before it, so that the kubelet expands it (it expands $(VAR) only to a variable defined
// earlier in the same env; a later or missing one stays literal text: Kubernetes docs,
// "Define Dependent Environment Variables",
// https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/).
//
// DYNAMO_RANK: "0" on the leader. A worker's rank is its clique pod index plus one
// (grove.io/podclique-pod-index 0 is rank 1), which no env can hold: the kubelet does no
// arithmetic, and Grove v0.1.0-alpha.12 labels no group-wide index (Dynamo 1.6 reads
// GROVE_PCSG_POD_INDEX, from the label grove.io/podcliquescalinggroup-pod-index, which
// Grove added after this release, grove#755, and Dynamo's multinode docs ask for Grove
// v0.1.0-alpha.14-rc1 with it; a fieldRef to that label is "" on alpha.12). So a
// worker's pod spec has no DYNAMO_RANK, and its shell exports it (exportRank).
func (g Grove) aliases(role Role) ([]corev1.EnvVar, bool) {
	env := []corev1.EnvVar{
		{Name: envGrovePCSGName, ValueFrom: labelField("grove.io/podcliquescalinggroup")},
		{Name: envGrovePCSGIndex, ValueFrom: labelField("grove.io/podcliquescalinggroup-replica-index")},
		{Name: EnvDynamoLeaderAddress, Value: fmt.Sprintf("$(%s)-$(%s)-%s-ldr-0.%s-0.%s.svc.cluster.local",
			envGrovePCSGName, envGrovePCSGIndex, g.Group, g.PCS, g.Namespace)},
	}
	if role == RoleLeader {
		return append(env, corev1.EnvVar{Name: EnvDynamoRank, Value: "0"}), false
	}
	return env, true
}

func labelField(key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", key)}}
}
