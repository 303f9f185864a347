package revisions

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

// TestHashGolden pins the hash of the sample DGD. If it fails after a dependency bump or
// a change to WorkerTemplate, every cluster would re-roll all workers on upgrade: make
// the change hash-neutral instead of updating the literals, unless the change reaches
// worker pods, which must bump render.RenderVersion (and these literals) on purpose.
// The literals changed last with render version 2 (Dynamo's pod contract, 8-hex
// hashes): an operator upgraded from an earlier version rolls every worker once.
func TestHashGolden(t *testing.T) {
	tests := []struct {
		name           string
		collisionCount *int32
		want           string
	}{
		{name: "no collision count", collisionCount: nil, want: "652a0bb6"},
		{name: "collision count 0 (what Sync uses)", collisionCount: ptr(int32(0)), want: "9670987e"},
		{name: "collision count 1", collisionCount: ptr(int32(1)), want: "f73f126b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Hash(NewWorkerTemplate(sampleDGD()), tc.collisionCount); got != tc.want {
				t.Errorf("Hash(sample) = %q, want %q", got, tc.want)
			}
		})
	}
	rev, err := NewRevision(sampleDGD(), 1, ptr(int32(0)))
	if err != nil {
		t.Fatal(err)
	}
	// The name is the graph hash (workers and stable services); the label the worker hash.
	if want := "vllm-disagg-2ee846c6"; rev.Name != want {
		t.Errorf("revision name = %q, want %q", rev.Name, want)
	}
	if want := "9670987e"; HashOf(rev) != want {
		t.Errorf("worker hash label = %q, want %q", HashOf(rev), want)
	}
}

// TestHashIgnores lists changes that must not start a worker rollout.
func TestHashIgnores(t *testing.T) {
	tests := map[string]func(d *v1alpha1.DynamoGraphDeployment){
		"worker replicas": func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services["VllmDecodeWorker"].Replicas = ptr(int32(7)) },
		"worker to zero off Grove": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].Replicas = ptr(int32(0))
		},
		"nil replicas":     func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services["VllmPrefillWorker"].Replicas = nil },
		"autoscaling":      decodeJSON("VllmDecodeWorker", `{"autoscaling":{"enabled":true}}`),
		"ingress":          decodeJSON("VllmDecodeWorker", `{"ingress":{"enabled":true}}`),
		"pvc":              decodeJSON("VllmDecodeWorker", `{"pvc":{"name":"x"}}`),
		"volumeMounts":     decodeJSON("VllmDecodeWorker", `{"volumeMounts":[{"name":"x","mountPoint":"/x"}]}`),
		"compilationCache": decodeJSON("VllmDecodeWorker", `{"compilationCache":{"pvcName":"c"}}`),
		"dynamoNamespace": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].DynamoNamespace = ptr("ns")
		},
		"serviceName": func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services["VllmDecodeWorker"].ServiceName = "x" },
		"max-surge annotation": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].Annotations = map[string]string{v1alpha1.AnnotationMaxSurge: "50%"}
		},
		"max-unavailable annotation": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].Annotations = map[string]string{v1alpha1.AnnotationMaxUnavailable: "0"}
		},
		"change-cause annotation on a service": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].Annotations = map[string]string{v1alpha1.AnnotationChangeCause: "why"}
		},
		"change-cause annotation on the DGD": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: "why"}
		},
		"frontend image": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:2"
		},
		"frontend replicas": func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services["Frontend"].Replicas = ptr(int32(3)) },
		"planner added": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Planner"] = &v1alpha1.DynamoComponentDeploymentSharedSpec{ComponentType: v1alpha1.ComponentTypePlanner}
		},
		"nil service entry": func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services["Ghost"] = nil },
		"backend defaulted": func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Backend = v1alpha1.BackendAuto },
		"rollout settings":  func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout = &v1alpha1.RolloutSpec{Paused: true} },
		"history limit":     func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.RevisionHistoryLimit = ptr(int32(3)) },
		"status and meta":   func(d *v1alpha1.DynamoGraphDeployment) { d.Status.CurrentRevision = "x"; d.Generation = 9 },
		"empty annotations": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].Annotations = map[string]string{}
		},
		"empty worker envs": func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services["VllmDecodeWorker"].Envs = []corev1.EnvVar{} },
		"nodeCount 1 is nil": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].Multinode = &v1alpha1.MultinodeSpec{NodeCount: 1}
		},
	}
	want := Hash(NewWorkerTemplate(sampleDGD()), nil)
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Hash(NewWorkerTemplate(mutate(sampleDGD(), change)), nil); got != want {
				t.Errorf("hash changed to %q, want %q", got, want)
			}
		})
	}
}

// TestHashCovers lists changes that must start a worker rollout.
func TestHashCovers(t *testing.T) {
	decode := func(f func(s *v1alpha1.DynamoComponentDeploymentSharedSpec)) func(*v1alpha1.DynamoGraphDeployment) {
		return func(d *v1alpha1.DynamoGraphDeployment) { f(d.Spec.Services["VllmDecodeWorker"]) }
	}
	type spec = v1alpha1.DynamoComponentDeploymentSharedSpec
	tests := map[string]func(d *v1alpha1.DynamoGraphDeployment){
		"image": decode(func(s *spec) { s.ExtraPodSpec.MainContainer.Image = "vllm-runtime:0.5.0" }),
		"args": decode(func(s *spec) {
			s.ExtraPodSpec.MainContainer.Args = append(s.ExtraPodSpec.MainContainer.Args, "--tp", "2")
		}),
		"command":          decode(func(s *spec) { s.ExtraPodSpec.MainContainer.Command = []string{"python"} }),
		"service env":      decode(func(s *spec) { s.Envs = []corev1.EnvVar{{Name: "A", Value: "1"}} }),
		"envFromSecret":    decode(func(s *spec) { s.EnvFromSecret = ptr("hf-token") }),
		"gpu limit":        decode(func(s *spec) { s.Resources.Limits.GPU = "2" }),
		"cpu request":      decode(func(s *spec) { s.Resources.Requests = &v1alpha1.ResourceItem{CPU: "4"} }),
		"nodeCount":        decode(func(s *spec) { s.Multinode = &v1alpha1.MultinodeSpec{NodeCount: 2} }),
		"other annotation": decode(func(s *spec) { s.Annotations = map[string]string{"a": "b"} }),
		"label":            decode(func(s *spec) { s.Labels = map[string]string{"a": "b"} }),
		"pod metadata":     decode(func(s *spec) { s.ExtraPodMetadata = &v1alpha1.ExtraPodMetadata{Labels: map[string]string{"a": "b"}} }),
		"pod spec":         decode(func(s *spec) { s.ExtraPodSpec.PodSpec = &corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}} }),
		"liveness probe":   decode(func(s *spec) { s.LivenessProbe = &corev1.Probe{PeriodSeconds: 5} }),
		"readiness probe":  decode(func(s *spec) { s.ReadinessProbe = &corev1.Probe{PeriodSeconds: 5} }),
		"subComponentType": decode(func(s *spec) { s.SubComponentType = "prefill" }),
		"componentType":    decode(func(s *spec) { s.ComponentType = v1alpha1.ComponentTypeDecode }),
		"graph envs":       func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Envs = []corev1.EnvVar{{Name: "A", Value: "1"}} },
		"backend":          func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Backend = v1alpha1.BackendGrove },
		"worker renamed": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Decode"] = d.Spec.Services["VllmDecodeWorker"]
			delete(d.Spec.Services, "VllmDecodeWorker")
		},
		"worker removed": func(d *v1alpha1.DynamoGraphDeployment) { delete(d.Spec.Services, "VllmDecodeWorker") },
		"worker added": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Extra"] = sampleWorker("decode", 1)
		},
		"frontend becomes a worker": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ComponentType = v1alpha1.ComponentTypeWorker
		},
		"sharedMemory":           decodeJSON("VllmDecodeWorker", `{"sharedMemory":{"size":"16Gi"}}`),
		"runtimeVersionOverride": decode(func(s *spec) { s.RuntimeVersionOverride = "1.6.0" }),
		"backendFramework":       func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.BackendFramework = "vllm" },
		"vLLM executor annotation on the DGD": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Annotations = map[string]string{render.AnnotationVLLMDistributedExecutor: "ray"}
		},
		"discovery backend annotation on the DGD": func(d *v1alpha1.DynamoGraphDeployment) {
			d.Annotations = map[string]string{render.AnnotationDiscoveryBackend: "etcd"}
		},
	}
	base := Hash(NewWorkerTemplate(sampleDGD()), nil)
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Hash(NewWorkerTemplate(mutate(sampleDGD(), change)), nil); got == base {
				t.Errorf("hash unchanged (%q), want a new hash", got)
			}
		})
	}
}

// TestHashZeroOnGrove: on Grove a worker scaled to or from zero is a new revision (its
// PodCliqueSet has no clique for it), other scaling is not.
func TestHashZeroOnGrove(t *testing.T) {
	grove := func(replicas int32) string {
		d := sampleDGD()
		d.Spec.Backend = v1alpha1.BackendGrove
		d.Spec.Services["VllmDecodeWorker"].Replicas = ptr(replicas)
		return Hash(NewWorkerTemplate(d), nil)
	}
	if grove(2) != grove(5) {
		t.Error("scaling a worker on Grove changed the hash")
	}
	if grove(0) == grove(2) {
		t.Error("a worker scaled to zero on Grove kept the hash")
	}
}

// TestHashCoversTheRenderer: the same spec rendered by another renderer is another
// revision, and the hash has Dynamo's worker-hash shape, 8 lowercase hex characters,
// the only suffix a strict frontend discovers.
func TestHashCoversTheRenderer(t *testing.T) {
	d := NewRevisionData(sampleDGD())
	now := Hash(d.Template(), ptr(int32(0)))
	d.RenderVersion--
	if before := Hash(d.Template(), ptr(int32(0))); before == now {
		t.Errorf("a revision made by render version %d hashes as one of %d", d.RenderVersion, render.RenderVersion)
	}
	for i := range int32(200) {
		if h := Hash(d.Template(), &i); !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(h) {
			t.Fatalf("hash %q is not 8 lowercase hex characters", h)
		}
	}
}

// TestHashMapOrder builds the same DGD with maps filled in different orders.
func TestHashMapOrder(t *testing.T) {
	build := func(reverse bool) *v1alpha1.DynamoGraphDeployment {
		d := sampleDGD()
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		services := map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{}
		names := []string{"Frontend", "VllmDecodeWorker", "VllmPrefillWorker"}
		if reverse {
			keys = []string{"h", "g", "f", "e", "d", "c", "b", "a"}
			names = []string{"VllmPrefillWorker", "VllmDecodeWorker", "Frontend"}
		}
		for _, n := range names {
			services[n] = d.Spec.Services[n]
		}
		d.Spec.Services = services
		for _, s := range services {
			s.Labels, s.Annotations = map[string]string{}, map[string]string{}
			for _, k := range keys {
				s.Labels[k], s.Annotations[k] = k+"-label", k+"-annotation"
			}
		}
		return d
	}
	want := Hash(NewWorkerTemplate(build(false)), nil)
	for range 20 {
		if got := Hash(NewWorkerTemplate(build(true)), nil); got != want {
			t.Fatalf("hash depends on map order: %q != %q", got, want)
		}
	}
}

// TestHashCollisionCount checks that distinct collision counts give distinct hashes.
func TestHashCollisionCount(t *testing.T) {
	seen := map[string]int32{}
	tmpl := NewWorkerTemplate(sampleDGD())
	for i := range int32(100) {
		h := Hash(tmpl, &i)
		if j, ok := seen[h]; ok {
			t.Fatalf("collision counts %d and %d give the same hash %q", j, i, h)
		}
		seen[h] = i
	}
}

// decodeJSON returns a change that decodes fragment into the named service, so that tests
// of kept-as-given fields do not depend on their Go types.
func decodeJSON(service, fragment string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		if err := json.Unmarshal([]byte(fragment), d.Spec.Services[service]); err != nil {
			panic(fmt.Sprintf("decoding %s: %v", fragment, err))
		}
	}
}

// fuzzDGD builds a DGD from fuzz input: worker images, shared args and replicas.
func fuzzDGD(decodeImage, prefillImage, args string, decodeReplicas, prefillReplicas int32) *v1alpha1.DynamoGraphDeployment {
	d := sampleDGD()
	argv := strings.Split(args, " ")
	d.Spec.Services["VllmDecodeWorker"] = sampleWorker("decode", decodeReplicas, argv...)
	d.Spec.Services["VllmDecodeWorker"].ExtraPodSpec.MainContainer.Image = decodeImage
	d.Spec.Services["VllmPrefillWorker"] = sampleWorker("prefill", prefillReplicas, append(argv, "--is-prefill-worker")...)
	d.Spec.Services["VllmPrefillWorker"].ExtraPodSpec.MainContainer.Image = prefillImage
	return d
}

// FuzzHash checks that Hash is deterministic (twice, and after a JSON round trip of the
// DGD, as the API server would return it), ignores replicas, survives any strings, and
// that Restore of a revision reproduces the revision's hash.
func FuzzHash(f *testing.F) {
	f.Add(sampleImage, sampleImage, "--model Qwen/Qwen3-0.6B", int32(2), int32(4))
	f.Add("", "", "", int32(0), int32(-1))
	f.Add("img\xff", "\uFFFD", "a\x00b \u2028", int32(1), int32(1))
	f.Fuzz(func(t *testing.T, decodeImage, prefillImage, args string, decodeReplicas, prefillReplicas int32) {
		d := fuzzDGD(decodeImage, prefillImage, args, decodeReplicas, prefillReplicas)
		want := Hash(NewWorkerTemplate(d), nil)
		if got := Hash(NewWorkerTemplate(d), nil); got != want {
			t.Fatalf("same input, different hashes: %q, %q", want, got)
		}
		data, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var roundTripped v1alpha1.DynamoGraphDeployment
		if err := json.Unmarshal(data, &roundTripped); err != nil {
			t.Fatal(err)
		}
		if got := Hash(NewWorkerTemplate(&roundTripped), nil); got != want {
			t.Fatalf("hash after JSON round trip = %q, want %q", got, want)
		}
		rescaled := fuzzDGD(decodeImage, prefillImage, args, prefillReplicas^decodeReplicas, decodeReplicas+1)
		if got := Hash(NewWorkerTemplate(rescaled), nil); got != want {
			t.Fatalf("hash after changing replicas = %q, want %q", got, want)
		}
		rev, err := NewRevision(d, 1, ptr(decodeReplicas))
		if err != nil {
			t.Fatal(err)
		}
		spec, err := Restore(sampleDGD(), rev)
		if err != nil {
			t.Fatal(err)
		}
		restored := &v1alpha1.DynamoGraphDeployment{Spec: *spec}
		if got := Hash(NewWorkerTemplate(restored), ptr(decodeReplicas)); got != HashOf(rev) {
			t.Fatalf("hash of restored spec = %q, want the revision's %q", got, HashOf(rev))
		}
	})
}
