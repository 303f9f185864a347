package revisions

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/render"
)

// readDGDs reads the DGD manifests of dir, by file name.
func readDGDs(t *testing.T, dir, version string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "apiVersion: nvidia.com/"+version) {
			out[filepath.Base(f)] = raw
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s DGDs in %s", version, dir)
	}
	return out
}

func alphaOf(t *testing.T, raw []byte) *v1alpha1.DynamoGraphDeployment {
	t.Helper()
	var a v1alpha1.DynamoGraphDeployment
	if err := yaml.UnmarshalStrict(raw, &a); err != nil {
		t.Fatal(err)
	}
	return &a
}

// fromBeta is what the operator works on for a DGD written in v1beta1.
func fromBeta(t *testing.T, b *v1beta1.DynamoGraphDeployment) *v1alpha1.DynamoGraphDeployment {
	t.Helper()
	var a v1alpha1.DynamoGraphDeployment
	if err := conversion.FromHub(b, &a); err != nil {
		t.Fatal(err)
	}
	return &a
}

// TestHashSameInBothVersions: a graph written in v1beta1 hashes as the same graph
// written in v1alpha1 (no rollout for rewriting a manifest in the other version): each
// sample against its twin in config/samples/v1beta1, and every v1alpha1 sample against
// the v1beta1 manifest its conversion writes (without the annotation that carries what
// v1beta1 cannot hold: a user writing v1beta1 by hand has none).
func TestHashSameInBothVersions(t *testing.T) {
	twins := readDGDs(t, "../config/samples/v1beta1", "v1beta1")
	for name, raw := range readDGDs(t, "../config/samples", "v1alpha1") {
		t.Run(name, func(t *testing.T) {
			a := alphaOf(t, raw)
			var b v1beta1.DynamoGraphDeployment
			if err := conversion.ToHub(a, &b); err != nil {
				t.Fatal(err)
			}
			delete(b.Annotations, conversion.AnnotationSpec)
			candidates := map[string]*v1alpha1.DynamoGraphDeployment{"converted": fromBeta(t, &b)}
			if twin, ok := twins[name]; ok {
				var tb v1beta1.DynamoGraphDeployment
				if err := yaml.UnmarshalStrict(twin, &tb); err != nil {
					t.Fatal(err)
				}
				candidates["config/samples/v1beta1/"+name] = fromBeta(t, &tb)
			} else {
				t.Errorf("no v1beta1 twin of %s", name)
			}
			graph := func(d *v1alpha1.DynamoGraphDeployment) GraphTemplate { r := NewRevisionData(d); return r.Graph() }
			want := Hash(NewWorkerTemplate(a), nil)
			wantGraph := GraphHash(graph(a), nil)
			for what, c := range candidates {
				if got := Hash(NewWorkerTemplate(c), nil); got != want {
					t.Errorf("%s: worker hash %s, v1alpha1 %s\n%s", what, got, want,
						cmp.Diff(NewWorkerTemplate(a), NewWorkerTemplate(c)))
				}
				if got := GraphHash(graph(c), nil); got != wantGraph {
					t.Errorf("%s: graph hash %s, v1alpha1 %s\n%s", what, got, wantGraph, cmp.Diff(graph(a), graph(c)))
				}
			}
		})
	}
}

// TestHashUnchangedForDynamoSpelling: every v1alpha1 sample (Dynamo's own spelling:
// envFromSecret, gpu in resources, image, command and args in mainContainer) is its own
// canonical form, so the operator upgrade changes none of their hashes (TestHashGolden
// pins one of them).
func TestHashUnchangedForDynamoSpelling(t *testing.T) {
	for name, raw := range readDGDs(t, "../config/samples", "v1alpha1") {
		for svc, s := range alphaOf(t, raw).Spec.Services {
			want := s.DeepCopy()
			want.DynamoNamespace = nil // not hashed anywhere
			got := canonical(s)
			got.DynamoNamespace = nil
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s %s: canonical form differs (-written +canonical):\n%s", name, svc, cmp.Diff(want, got))
			}
		}
	}
}

// TestCanonicalRendersTheSame: the spellings canonical folds together render the same
// pod, and the canonical form renders it too (the hash never hides a pod change).
func TestCanonicalRendersTheSame(t *testing.T) {
	probe := func(p int32) *corev1.Probe { return &corev1.Probe{PeriodSeconds: p} }
	secret := func(n string) []corev1.EnvFromSource {
		return []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}}}
	}
	img := func(c corev1.Container) *v1alpha1.ExtraPodSpec {
		c.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0"
		return &v1alpha1.ExtraPodSpec{MainContainer: &c}
	}
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	name := "hf"
	groups := map[string][]*v1alpha1.DynamoComponentDeploymentSharedSpec{
		"env": {
			{ComponentType: "worker", Envs: env("A", "1", "B", "2"), ExtraPodSpec: img(corev1.Container{})},
			{ComponentType: "worker", ExtraPodSpec: img(corev1.Container{Env: env("A", "1", "B", "2")})},
			{ComponentType: "worker", Envs: env("B", "2"), ExtraPodSpec: img(corev1.Container{Env: env("A", "1", "B", "x")})},
		},
		"envFrom": {
			{ComponentType: "worker", EnvFromSecret: &name, ExtraPodSpec: img(corev1.Container{})},
			{ComponentType: "worker", ExtraPodSpec: img(corev1.Container{EnvFrom: secret("hf")})},
		},
		"probes": {
			{ComponentType: "worker", LivenessProbe: probe(3), ExtraPodSpec: img(corev1.Container{})},
			{ComponentType: "worker", ExtraPodSpec: img(corev1.Container{LivenessProbe: probe(3)})},
			{ComponentType: "worker", LivenessProbe: probe(3), ExtraPodSpec: img(corev1.Container{LivenessProbe: probe(9)})},
		},
		"resources": {
			{ComponentType: "worker", Resources: &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1", CPU: "500m"}}, ExtraPodSpec: img(corev1.Container{})},
			{ComponentType: "worker", Resources: &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1", CPU: "0.5"}}, ExtraPodSpec: img(corev1.Container{})},
			{ComponentType: "worker", Resources: &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}, ExtraPodSpec: img(corev1.Container{Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}})},
			{ComponentType: "worker", Resources: &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{Custom: map[string]string{"nvidia.com/gpu": "1", "cpu": "500m"}}}, ExtraPodSpec: img(corev1.Container{})},
		},
		"sharedMemory": {
			{ComponentType: "worker", ExtraPodSpec: img(corev1.Container{})},
			{ComponentType: "worker", SharedMemory: &v1alpha1.SharedMemorySpec{}, ExtraPodSpec: img(corev1.Container{})},
		},
	}
	dgd := &v1alpha1.DynamoGraphDeployment{}
	dgd.Namespace, dgd.Name = "ns", "g"
	pod := func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) corev1.PodTemplateSpec {
		t.Helper()
		p, err := render.Component{DGD: dgd, Name: "w", Spec: s, Hash: "abcdef12"}.Pod(render.RoleMain, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for group, specs := range groups {
		want, wantT := pod(specs[0]), newServiceTemplate(specs[0])
		for i, s := range specs {
			if got := pod(s); !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s #%d renders another pod (-#0 +#%d):\n%s", group, i, i, cmp.Diff(want, got))
			}
			if got := pod(canonical(s)); !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s #%d: its canonical form renders another pod:\n%s", group, i, cmp.Diff(want, got))
			}
			if got := newServiceTemplate(s); !apiequality.Semantic.DeepEqual(got, wantT) {
				t.Errorf("%s #%d hashes apart from #0:\n%s", group, i, cmp.Diff(wantT, got))
			}
		}
	}
}

// TestSyncKeepsAnOldWorkerHash: a running revision labelled with a worker hash the
// canonical layout would not give (one made before it, from another spelling) is kept
// by an unchanged spec, and a stable-only change makes a revision with that same worker
// hash, so nothing rolls.
func TestSyncKeepsAnOldWorkerHash(t *testing.T) {
	dgd := sampleDGD()
	running := ownedRevision(t, dgd, 1, 0, dgd)
	running.Labels[v1alpha1.LabelWorkerHash] = "0badc0de"
	dgd.Status.CurrentRevision = running.Name
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			h := impl.new(t, running)
			res, err := Sync(context.Background(), h, dgd, sets.New("0badc0de"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Created || res.Update.Name != running.Name {
				t.Fatalf("unchanged spec: update %s (created %v), want the running %s", res.Update.Name, res.Created, running.Name)
			}
			stable := mutate(dgd, func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "frontend:2"
			})
			res, err = Sync(context.Background(), h, stable, sets.New("0badc0de"))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Created || HashOf(res.Update) != "0badc0de" {
				t.Errorf("stable-only change: created %v, worker hash %s; want a new revision keeping 0badc0de", res.Created, HashOf(res.Update))
			}
		})
	}
}
