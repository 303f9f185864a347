package grove

import (
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The goldens below are written from Grove's source at operator/v0.1.0-alpha.12-rc1
// (see objects.go), for PodCliqueSet llm in namespace prod: a standalone clique
// frontend and a scaling group decode of decode-ldr (1 pod) and decode-wkr (3 pods),
// minAvailable 1, as the operator renders a multinode service.

func testPCS() *grovev1.PodCliqueSet {
	clique := func(name string, replicas int32) *grovev1.PodCliqueTemplateSpec {
		return &grovev1.PodCliqueTemplateSpec{Name: name, Labels: map[string]string{"nvidia.com/dynamo-component": "decode"},
			Spec: grovev1.PodCliqueSpec{Replicas: replicas, StartsAfter: []string{"x"}, PodSpec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "wait-for-leader-mp"}},
				Containers:     []corev1.Container{{Name: "main", Env: []corev1.EnvVar{{Name: "DYN_NAMESPACE", Value: "prod-llm"}}}},
			}}}
	}
	return &grovev1.PodCliqueSet{
		Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: grovev1.PodCliqueSetTemplateSpec{
			Cliques: []*grovev1.PodCliqueTemplateSpec{clique("frontend", 2), clique("decode-ldr", 1), clique("decode-wkr", 3)},
			PodCliqueScalingGroupConfigs: []grovev1.PodCliqueScalingGroupConfig{
				{Name: "decode", CliqueNames: []string{"decode-ldr", "decode-wkr"}, MinAvailable: ptr.To[int32](1)}},
		}},
	}
}

func labelEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + key + "']"}}}
}

// pcsgEnv is what the PCSG controller appends to every container and init container of
// its PodCliques (addEnvironmentVariablesToPodContainerSpecs), numPods 1 + 3.
var pcsgEnv = []corev1.EnvVar{
	labelEnv("GROVE_PCSG_NAME", "grove.io/podcliquescalinggroup"),
	{Name: "GROVE_PCSG_TEMPLATE_NUM_PODS", Value: "4"},
	labelEnv("GROVE_PCSG_INDEX", "grove.io/podcliquescalinggroup-replica-index"),
}

// podEnv is what the PodClique controller appends to every container and init
// container of a pod of PodClique pclq (addEnvironmentVariables).
func podEnv(pclq string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "GROVE_PCS_NAME", Value: "llm"},
		{Name: "GROVE_PCS_INDEX", Value: "0"},
		{Name: "GROVE_PCLQ_NAME", Value: pclq},
		{Name: "GROVE_HEADLESS_SERVICE", Value: "llm-0.prod.svc.cluster.local"},
		labelEnv("GROVE_PCLQ_POD_INDEX", "grove.io/podclique-pod-index"),
	}
}

func concat(lists ...[]corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// TestScalingGroupPod: a worker pod of gang 1 (a scaled PodGang: 1 >= minAvailable) has
// Grove's labels and none other (no group-wide pod index at this release), the PCSG env
// and then the pod env after the template's, in the main and the init container alike,
// hostname <pclq>-<k>, subdomain <pcs>-0, the PodGang gate and default-scheduler.
func TestScalingGroupPod(t *testing.T) {
	pcs := testPCS()
	pcs.Name, pcs.Namespace = "llm", "prod"
	pcsg := &grovev1.PodCliqueScalingGroup{Spec: grovev1.PodCliqueScalingGroupSpec{MinAvailable: ptr.To[int32](1),
		CliqueNames: []string{"decode-ldr", "decode-wkr"}}}
	pcsg.Name = "llm-0-decode"
	pclq := ScalingGroupPodClique(pcs, pcsg, 1, pcs.Spec.Template.Cliques[2])
	const name = "llm-0-decode-1-decode-wkr"
	hash := PodTemplateHash(pcs.Spec.Template.Cliques[2])
	wantClique := map[string]string{
		"nvidia.com/dynamo-component":                  "decode",
		"app.kubernetes.io/managed-by":                 "grove-operator",
		"app.kubernetes.io/part-of":                    "llm",
		"app.kubernetes.io/name":                       name,
		"app.kubernetes.io/component":                  "pcsg-podclique",
		"grove.io/podcliquescalinggroup":               "llm-0-decode",
		"grove.io/podgang":                             "llm-0-decode-0",
		"grove.io/base-podgang":                        "llm-0",
		"grove.io/podcliqueset-replica-index":          "0",
		"grove.io/podcliquescalinggroup-replica-index": "1",
		"grove.io/pod-template-hash":                   hash,
	}
	diff(t, "PodClique name", name, pclq.Name)
	diff(t, "PodClique labels", wantClique, pclq.Labels)
	diff(t, "PodClique startsAfter (Grove resolves it to PodClique names; not built)", []string(nil), pclq.Spec.StartsAfter)
	diff(t, "PodClique main env", concat([]corev1.EnvVar{{Name: "DYN_NAMESPACE", Value: "prod-llm"}}, pcsgEnv), pclq.Spec.PodSpec.Containers[0].Env)
	diff(t, "PodClique init env", pcsgEnv, pclq.Spec.PodSpec.InitContainers[0].Env)

	pod := Pod(pcs, pclq, 2)
	wantPod := map[string]string{"grove.io/podclique": name, "grove.io/podclique-pod-index": "2"}
	for k, v := range wantClique {
		wantPod[k] = v
	}
	diff(t, "pod labels", wantPod, pod.Labels)
	diff(t, "pod generateName", name+"-", pod.GenerateName)
	diff(t, "pod main env", concat([]corev1.EnvVar{{Name: "DYN_NAMESPACE", Value: "prod-llm"}}, pcsgEnv, podEnv(name)), pod.Spec.Containers[0].Env)
	diff(t, "pod init env", concat(pcsgEnv, podEnv(name)), pod.Spec.InitContainers[0].Env)
	diff(t, "hostname, subdomain, gate, scheduler",
		[]any{name + "-2", "llm-0", []corev1.PodSchedulingGate{{Name: "grove.io/podgang-pending-creation"}}, "default-scheduler"},
		[]any{pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SchedulingGates, pod.Spec.SchedulerName})
}

// TestStandalonePod: a standalone clique's PodClique gets no env of its own, its pods
// only the pod env, and the base PodGang.
func TestStandalonePod(t *testing.T) {
	pcs := testPCS()
	pcs.Name, pcs.Namespace = "llm", "prod"
	pclq := StandalonePodClique(pcs, pcs.Spec.Template.Cliques[0])
	diff(t, "PodClique labels", map[string]string{
		"nvidia.com/dynamo-component":         "decode",
		"app.kubernetes.io/managed-by":        "grove-operator",
		"app.kubernetes.io/part-of":           "llm",
		"app.kubernetes.io/name":              "llm-0-frontend",
		"app.kubernetes.io/component":         "pcs-podclique",
		"grove.io/podgang":                    "llm-0",
		"grove.io/podcliqueset-replica-index": "0",
		"grove.io/pod-template-hash":          PodTemplateHash(pcs.Spec.Template.Cliques[0]),
	}, pclq.Labels)
	pod := Pod(pcs, pclq, 0)
	diff(t, "pod main env", concat([]corev1.EnvVar{{Name: "DYN_NAMESPACE", Value: "prod-llm"}}, podEnv("llm-0-frontend")), pod.Spec.Containers[0].Env)
	diff(t, "pod init env", podEnv("llm-0-frontend"), pod.Spec.InitContainers[0].Env)
	diff(t, "hostname", "llm-0-frontend-0", pod.Spec.Hostname)
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s: -want +got\n%s", what, d)
	}
}
