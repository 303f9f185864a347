package render

import (
	"fmt"
	"regexp"

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
	// that env can express, and a shell prefix setting those it cannot.
	aliases(role Role) (env []corev1.EnvVar, shellExport string)
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

func (LWS) aliases(Role) ([]corev1.EnvVar, string) {
	return envs(EnvDynamoLeaderAddress, "$(LWS_LEADER_ADDRESS)", EnvDynamoRank, "$(LWS_WORKER_INDEX)"), ""
}

// Grove is a PodCliqueScalingGroup replica: a leader clique `<Group>-ldr` of one pod and
// a worker clique `<Group>-wkr`, in PodCliqueSet PCS of namespace Namespace. Grove
// appends its GROVE_* variables after the template's env, so ours cannot reference
// them; the aliases read Grove's labels through the downward API instead.
type Grove struct {
	PCS, Group, Namespace string
}

var _ Gang = Grove{}

// Downward-API helpers for the Grove aliases (Grove's own GROVE_PCSG_NAME and
// GROVE_PCSG_INDEX read the same labels).
const (
	envGrovePCSGName  = "DYNAMO_GROVE_PCSG_NAME"
	envGrovePCSGIndex = "DYNAMO_GROVE_PCSG_INDEX"
)

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

// LabelGrovePCSGPodIndex is the group-wide pod index Grove puts on every pod of a
// scaling group replica, its cliques flattened in cliqueNames order (ours: `-ldr`, then
// `-wkr`), so it is the gang rank: 0 on the leader, 1..nodeCount-1 on the workers. It is
// what Dynamo 1.6 reads DYNAMO_RANK from on Grove (GROVE_PCSG_POD_INDEX, Dynamo's
// multinode guide "Portable Topology Environment Variables": Grove v0.1.0-alpha.14-rc1
// or later; grove#755).
const LabelGrovePCSGPodIndex = "grove.io/podcliquescalinggroup-pod-index"

// aliases: DYNAMO_LEADER_ADDRESS from the group's name and replica index (Grove's own
// labels, read through the downward API: Grove up to v0.1.0-alpha.12 appends its GROVE_*
// variables after ours, so ours cannot reference them), and DYNAMO_RANK: "0" on the
// leader; on a worker, Grove's group-wide pod index as Dynamo 1.6 renders it, and, for
// Grove releases that do not label pods with it yet (v0.1.0-alpha.12, which this
// operator is tested against), exported by the worker's shell from its clique index,
// which always holds (the export runs before the runtime starts).
func (g Grove) aliases(role Role) ([]corev1.EnvVar, string) {
	env := []corev1.EnvVar{
		{Name: envGrovePCSGName, ValueFrom: labelField("grove.io/podcliquescalinggroup")},
		{Name: envGrovePCSGIndex, ValueFrom: labelField("grove.io/podcliquescalinggroup-replica-index")},
		{Name: EnvDynamoLeaderAddress, Value: fmt.Sprintf("$(%s)-$(%s)-%s-ldr-0.%s-0.%s.svc.cluster.local",
			envGrovePCSGName, envGrovePCSGIndex, g.Group, g.PCS, g.Namespace)},
	}
	if role == RoleLeader {
		return append(env, corev1.EnvVar{Name: EnvDynamoRank, Value: "0"}), ""
	}
	env = append(env, corev1.EnvVar{Name: EnvDynamoRank, ValueFrom: labelField(LabelGrovePCSGPodIndex)})
	return env, fmt.Sprintf("export %s=$((GROVE_PCLQ_POD_INDEX + 1)); ", EnvDynamoRank)
}

func labelField(key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", key)}}
}

// kubeVar is a kubelet variable reference, $(NAME).
var kubeVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// shellVars turns the kubelet's $(VAR) references into the shell's ${VAR}, for scripts
// in containers where the referenced variables are defined after ours (Grove's), which
// the kubelet would leave unexpanded (Dynamo's k8sToShellVarSyntax).
func shellVars(s string) string { return kubeVar.ReplaceAllString(s, "$${$1}") }
