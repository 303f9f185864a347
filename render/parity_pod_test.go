package render_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

func shmVolume(size string) corev1.Volume {
	q := resource.MustParse(size)
	return corev1.Volume{Name: "shared-memory", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &q}}}
}

var shmMount = corev1.VolumeMount{Name: "shared-memory", MountPath: "/dev/shm"}

// podGolden is the expected pod-level rendering of a single-node service.
type podGolden struct {
	securityContext *corev1.PodSecurityContext
	volumes         []corev1.Volume
	mounts          []corev1.VolumeMount
	resources       corev1.ResourceRequirements
	serviceAccount  string
}

// TestParityPodDefaults: terminationGracePeriodSeconds 60 and restartPolicy Always;
// securityContext {fsGroup: 1000} only when the user set none; the shared-memory
// emptyDir (Memory, 8Gi, or sharedMemory.size; none when disabled; size 0 → 8Gi) at
// /dev/shm replacing a user volume or mount of that name or path; gpu → nvidia.com/gpu
// or gpuType, cpu/memory/custom by name, no requests↔limits mirroring; the service
// account: discovery SA under Kubernetes discovery, planner-serviceaccount for the
// planner, none under etcd, the user's own kept (DYNAMO.md "Every component", notes §4).
func TestParityPodDefaults(t *testing.T) {
	fs1000 := &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)}
	discoverySA := "llm-k8s-service-discovery"
	dflt := podGolden{fs1000, []corev1.Volume{shmVolume("8Gi")}, []corev1.VolumeMount{shmMount}, corev1.ResourceRequirements{}, discoverySA}
	with := func(f func(*podGolden)) podGolden {
		g := dflt
		f(&g)
		return g
	}
	etcd := map[string]string{"nvidia.com/dynamo-discovery-backend": "etcd"}
	cache := corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	cacheMount := corev1.VolumeMount{Name: "cache", MountPath: "/cache"}
	q := resource.MustParse
	cases := []struct {
		name string
		ann  map[string]string
		s    *spec
		want podGolden
	}{
		{"frontend defaults", nil, svc("frontend", img("1.6.0")), dflt},
		{"decode defaults", nil, svc("decode", img("1.6.0")), dflt},
		{"planner defaults", nil, svc("planner", img("1.6.0")), with(func(g *podGolden) { g.serviceAccount = "planner-serviceaccount" })},
		{"other type defaults", nil, svc("router", img("1.6.0")), dflt},
		{"etcd: worker has no service account", etcd, svc("decode", img("1.6.0")), with(func(g *podGolden) { g.serviceAccount = "" })},
		{"etcd: frontend has no service account", etcd, svc("frontend", img("1.6.0")), with(func(g *podGolden) { g.serviceAccount = "" })},
		{"etcd: planner keeps planner-serviceaccount", etcd, svc("planner", img("1.6.0")),
			with(func(g *podGolden) { g.serviceAccount = "planner-serviceaccount" })},
		{"user service account kept", nil, svc("decode", img("1.6.0"), func(s *spec) { podOf(s).ServiceAccountName = "mine" }),
			with(func(g *podGolden) { g.serviceAccount = "mine" })},
		{"user securityContext: no fsGroup default", nil,
			svc("decode", img("1.6.0"), func(s *spec) { podOf(s).SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)} }),
			with(func(g *podGolden) { g.securityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)} })},
		{"user fsGroup kept", nil,
			svc("frontend", img("1.6.0"), func(s *spec) { podOf(s).SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)} }),
			with(func(g *podGolden) { g.securityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)} })},
		{"sharedMemory.size", nil,
			svc("decode", img("1.6.0"), func(s *spec) { s.SharedMemory = &v1alpha1.SharedMemorySpec{Size: ptr.To(q("16Gi"))} }),
			with(func(g *podGolden) { g.volumes = []corev1.Volume{shmVolume("16Gi")} })},
		{"sharedMemory.size 0 is the default", nil,
			svc("decode", img("1.6.0"), func(s *spec) { s.SharedMemory = &v1alpha1.SharedMemorySpec{Size: ptr.To(q("0"))} }), dflt},
		{"sharedMemory.disabled", nil,
			svc("decode", img("1.6.0"), func(s *spec) { s.SharedMemory = &v1alpha1.SharedMemorySpec{Disabled: true} }),
			with(func(g *podGolden) { g.volumes, g.mounts = nil, nil })},
		{"user volumes kept, a user shared-memory volume and /dev/shm mount replaced", nil,
			svc("decode", img("1.6.0"), func(s *spec) {
				podOf(s).Volumes = []corev1.Volume{cache, {Name: "shared-memory", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				mainOf(s).VolumeMounts = []corev1.VolumeMount{cacheMount, {Name: "my-shm", MountPath: "/dev/shm"}}
			}),
			with(func(g *podGolden) {
				g.volumes = []corev1.Volume{cache, shmVolume("8Gi")}
				g.mounts = []corev1.VolumeMount{cacheMount, shmMount}
			})},
		{"gpu → nvidia.com/gpu; cpu, memory, custom", nil,
			svc("decode", img("1.6.0"), func(s *spec) {
				s.Resources = &v1alpha1.Resources{
					Requests: &v1alpha1.ResourceItem{CPU: "4", Memory: "32Gi", GPU: "2"},
					Limits:   &v1alpha1.ResourceItem{GPU: "2", Custom: map[string]string{"rdma/ib": "1"}},
				}
			}),
			with(func(g *podGolden) {
				g.resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"cpu": q("4"), "memory": q("32Gi"), "nvidia.com/gpu": q("2")},
					Limits:   corev1.ResourceList{"nvidia.com/gpu": q("2"), "rdma/ib": q("1")},
				}
			})},
		{"gpuType names the GPU resource", nil,
			svc("decode", img("1.6.0"), func(s *spec) {
				s.Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1", GPUType: "nvidia.com/mig-1g.10gb"}}
			}),
			with(func(g *podGolden) {
				g.resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/mig-1g.10gb": q("1")}}
			})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hash := ""
			if tc.s.IsWorker() {
				hash = pHash
			}
			p := renderOne(t, tc.ann, "Comp", tc.s, hash, render.Config{}, render.RoleMain, nil)
			diff(t, "terminationGracePeriodSeconds", ptr.To[int64](60), p.Spec.TerminationGracePeriodSeconds)
			diff(t, "restartPolicy", corev1.RestartPolicyAlways, p.Spec.RestartPolicy)
			diff(t, "securityContext", tc.want.securityContext, p.Spec.SecurityContext)
			diff(t, "volumes", tc.want.volumes, p.Spec.Volumes)
			diff(t, "main volumeMounts", tc.want.mounts, p.Spec.Containers[0].VolumeMounts)
			diff(t, "main resources", tc.want.resources, p.Spec.Containers[0].Resources)
			diff(t, "serviceAccountName", tc.want.serviceAccount, p.Spec.ServiceAccountName)
		})
	}
}

// TestParityPodLabels: DYNAMO.md "Labels" (and notes §4 generateLabels): selector
// `<dgd>-<lower service>` (+ `-<hash>` on workers), component, namespace, graph name,
// component type, sub-component type, metrics-enabled unless the DGD annotation
// nvidia.com/enable-metrics is "false", worker hash, the discovery labels under
// Kubernetes discovery; system labels win over the service's; plus this operator's
// app.kubernetes.io/managed-by: dgd-rollout.
func TestParityPodLabels(t *testing.T) {
	base := func(svcName, selector, typ string) map[string]string {
		return map[string]string{
			"nvidia.com/selector":                     selector,
			"nvidia.com/dynamo-component":             svcName,
			"nvidia.com/dynamo-namespace":             pDynNS,
			"nvidia.com/dynamo-graph-deployment-name": pDGD,
			"nvidia.com/dynamo-component-type":        typ,
			"nvidia.com/metrics-enabled":              "true",
			"nvidia.com/dynamo-discovery-backend":     "kubernetes",
			"nvidia.com/dynamo-discovery-enabled":     "true",
			"app.kubernetes.io/managed-by":            "dgd-rollout",
		}
	}
	worker := set(base("VllmDecodeWorker", "llm-vllmdecodeworker-"+pHash, "worker"),
		"nvidia.com/dynamo-sub-component-type", "decode", "nvidia.com/dynamo-worker-hash", pHash)
	cases := []struct {
		name    string
		ann     map[string]string
		svcName string
		s       *spec
		hash    string
		want    map[string]string
	}{
		{"frontend", nil, "Frontend", svc("frontend", img("1.6.0")), "", base("Frontend", "llm-frontend", "frontend")},
		{"worker with subComponentType decode", nil, "VllmDecodeWorker", svc("worker", img("1.6.0"), subTypeOpt("decode")), pHash, worker},
		{"prefill", nil, "Prefill", svc("prefill", img("1.6.0")), pHash,
			set(base("Prefill", "llm-prefill-"+pHash, "prefill"), "nvidia.com/dynamo-worker-hash", pHash)},
		{"planner", nil, "Planner", svc("planner", img("1.6.0")), "", base("Planner", "llm-planner", "planner")},
		{"other type", nil, "Router", svc("router", img("1.6.0")), "", base("Router", "llm-router", "router")},
		{"DGD annotation enable-metrics false", map[string]string{"nvidia.com/enable-metrics": "false"},
			"VllmDecodeWorker", svc("worker", img("1.6.0"), subTypeOpt("decode")), pHash,
			set(worker, "nvidia.com/metrics-enabled", "<none>")},
		{"etcd discovery: no discovery labels", map[string]string{"nvidia.com/dynamo-discovery-backend": "etcd"},
			"VllmDecodeWorker", svc("worker", img("1.6.0"), subTypeOpt("decode")), pHash,
			set(worker, "nvidia.com/dynamo-discovery-backend", "<none>", "nvidia.com/dynamo-discovery-enabled", "<none>")},
		{"service labels kept, system labels win", nil, "Frontend",
			svc("frontend", img("1.6.0"), labelsOpt("team", "a", "nvidia.com/dynamo-namespace", "evil", "nvidia.com/selector", "evil")), "",
			set(base("Frontend", "llm-frontend", "frontend"), "team", "a")},
		{"extraPodMetadata labels kept", nil, "Frontend",
			svc("frontend", img("1.6.0"), func(s *spec) { s.ExtraPodMetadata = &v1alpha1.ExtraPodMetadata{Labels: kvs("tier", "gold")} }), "",
			set(base("Frontend", "llm-frontend", "frontend"), "tier", "gold")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := renderOne(t, tc.ann, tc.svcName, tc.s, tc.hash, render.Config{}, render.RoleMain, nil)
			diff(t, "labels", tc.want, p.Labels)
		})
	}
}

// TestParityPodAnnotations: the DGD annotations Dynamo propagates
// (dgdPropagatedAnnotationKeys: enable-metrics, dynamo-discovery-backend,
// dynamo-kube-discovery-mode, dynamo-operator-origin-version,
// vllm-distributed-executor-backend) reach the pods unless the service sets them;
// others do not; the service's annotations reach the pods (notes §4).
func TestParityPodAnnotations(t *testing.T) {
	dgdAnn := kvs("nvidia.com/enable-metrics", "true", "nvidia.com/dynamo-discovery-backend", "kubernetes",
		"nvidia.com/dynamo-kube-discovery-mode", "pod", "nvidia.com/dynamo-operator-origin-version", "1.2.0",
		"nvidia.com/vllm-distributed-executor-backend", "mp", "example.com/unrelated", "x")
	propagated := set(dgdAnn, "example.com/unrelated", "<none>")
	cases := []struct {
		name string
		ann  map[string]string
		s    *spec
		want map[string]string
	}{
		{"propagated DGD annotations only", dgdAnn, svc("decode", img("1.6.0")), propagated},
		{"service value wins; service annotations kept", dgdAnn,
			svc("decode", img("1.6.0"), annOpt("nvidia.com/vllm-distributed-executor-backend", "ray", "example.com/team", "a")),
			set(propagated, "nvidia.com/vllm-distributed-executor-backend", "ray", "example.com/team", "a")},
		{"extraPodMetadata annotations kept", nil,
			svc("frontend", img("1.6.0"), func(s *spec) {
				s.ExtraPodMetadata = &v1alpha1.ExtraPodMetadata{Annotations: kvs("prometheus.io/scrape", "true")}
			}),
			kvs("prometheus.io/scrape", "true")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hash := ""
			if tc.s.IsWorker() {
				hash = pHash
			}
			p := renderOne(t, tc.ann, "Comp", tc.s, hash, render.Config{}, render.RoleMain, nil)
			diff(t, "annotations", tc.want, p.Annotations)
		})
	}
}
