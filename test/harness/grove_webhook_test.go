package harness_test

import (
	"context"
	"strings"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/harness"
)

// renderedPCS is the PodCliqueSet the Grove backend creates for a revision of a
// disaggregated graph with a multinode decode.
func renderedPCS(t *testing.T) *grovev1.PodCliqueSet {
	t.Helper()
	dgd := harness.NewDGD("ns", "g").Disagg(4, 2, "vllm:v1").Multinode("decode", 4).Backend(v1alpha1.BackendGrove).Obj()
	dgd.UID = "uid"
	c := fake.NewClientBuilder().WithScheme(app.NewScheme()).Build()
	b := grove.New(c, app.NewScheme(), render.Config{})
	pool := backends.Pool{Hash: "abcd1234"}
	for _, name := range dgd.WorkerServiceNames() {
		pool.Services = append(pool.Services, backends.ServiceWorkload{Key: backends.Key{Service: name, Hash: "abcd1234"}, Spec: dgd.Spec.Services[name], Replicas: 1})
	}
	ctx := context.Background()
	if err := b.Ensure(ctx, dgd, pool); err != nil {
		t.Fatal(err)
	}
	// The backend picks the PodCliqueSet's name (the first free of g, g-1, ...): the
	// only one in the namespace is the revision's.
	var pcss grovev1.PodCliqueSetList
	if err := c.List(ctx, &pcss, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(pcss.Items) != 1 {
		t.Fatalf("%d PodCliqueSets rendered, want 1", len(pcss.Items))
	}
	return &pcss.Items[0]
}

// TestGroveRejects: the PodCliqueSet the operator renders passes Grove's webhook on
// create, and each rule fires on a create or an update that breaks it.
func TestGroveRejects(t *testing.T) {
	pcs := renderedPCS(t)
	if v := harness.GroveRejects(nil, pcs); len(v) > 0 {
		t.Fatalf("the rendered PodCliqueSet is rejected on create: %q", v)
	}
	clique := func(p *grovev1.PodCliqueSet, name string) *grovev1.PodCliqueTemplateSpec {
		for _, c := range p.Spec.Template.Cliques {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no clique %s", name)
		return nil
	}
	for name, tc := range map[string]struct {
		update bool
		change func(*grovev1.PodCliqueSet)
		want   string
	}{
		"a clique at 0 replicas": {false, func(p *grovev1.PodCliqueSet) { clique(p, "prefill").Spec.Replicas = 0 }, "clique prefill: replicas 0 must be greater than 0"},
		"minAvailable above replicas": {false, func(p *grovev1.PodCliqueSet) { clique(p, "prefill").Spec.MinAvailable = ptr.To[int32](5) },
			"clique prefill: minAvailable 5 must be in 1..replicas 1"},
		"no minAvailable": {false, func(p *grovev1.PodCliqueSet) { clique(p, "prefill").Spec.MinAvailable = nil }, "clique prefill: minAvailable is required"},
		"an env var set twice": {false, func(p *grovev1.PodCliqueSet) {
			c := &clique(p, "prefill").Spec.PodSpec.Containers[0]
			c.Env = append(c.Env, c.Env[0])
		}, "set twice"},
		"no terminationDelay":      {false, func(p *grovev1.PodCliqueSet) { p.Spec.Template.TerminationDelay = nil }, "terminationDelay must be set"},
		"names over 45 characters": {false, func(p *grovev1.PodCliqueSet) { p.Name = strings.Repeat("x", 40) }, "over 45"},
		"topology spread on create": {false, func(p *grovev1.PodCliqueSet) {
			clique(p, "prefill").Spec.PodSpec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{}}
		}, "must not set topologySpreadConstraints"},
		"a scaling group naming no clique": {false, func(p *grovev1.PodCliqueSet) {
			p.Spec.Template.PodCliqueScalingGroupConfigs[0].CliqueNames = append(p.Spec.Template.PodCliqueScalingGroupConfigs[0].CliqueNames, "nope")
		}, "clique nope is not defined"},
		"two cliques of one roleName": {false, func(p *grovev1.PodCliqueSet) {
			clique(p, "prefill").Spec.RoleName = clique(p, "decode-ldr").Spec.RoleName
		},
			"roleNames [decode-ldr] are not unique"},
		"a clique added on update": {true, func(p *grovev1.PodCliqueSet) {
			c := clique(p, "prefill").DeepCopy()
			c.Name, c.Spec.RoleName = "prefill2", "prefill2"
			p.Spec.Template.Cliques = append(p.Spec.Template.Cliques, c)
		}, "not allowed to change clique composition"},
		"minAvailable changed on update": {true, func(p *grovev1.PodCliqueSet) { clique(p, "decode-wkr").Spec.MinAvailable = ptr.To[int32](1) },
			"immutable field of clique decode-wkr changed"},
	} {
		cur := pcs.DeepCopy()
		tc.change(cur)
		var old *grovev1.PodCliqueSet
		if tc.update {
			old = pcs
		}
		got := harness.GroveRejects(old, cur)
		if !strings.Contains(strings.Join(got, "; "), tc.want) {
			t.Errorf("%s: got %q, want one containing %q", name, got, tc.want)
		}
	}
	// The operator's own update, a replica count in the template, is allowed.
	cur := pcs.DeepCopy()
	clique(cur, "prefill").Spec.Replicas = 3
	if v := harness.GroveRejects(pcs, cur); len(v) > 0 {
		t.Errorf("a template replica change is rejected: %q", v)
	}
}

// TestGroveRejectsCohortFrontend: a revision's pool with its cohort frontend renders the
// workers' PodCliqueSet and the frontend's own, both accepted on create; the frontend
// put into the live workers' PodCliqueSet instead (what the prelude would have to do)
// is refused as Grove refuses it, which is why the backend never does.
func TestGroveRejectsCohortFrontend(t *testing.T) {
	dgd := harness.NewDGD("ns", "g").Disagg(4, 2, "vllm:v1").Multinode("decode", 4).Backend(v1alpha1.BackendGrove).Obj()
	dgd.UID = "uid"
	c := fake.NewClientBuilder().WithScheme(app.NewScheme()).Build()
	b := grove.New(c, app.NewScheme(), render.Config{})
	pool := backends.Pool{Hash: "abcd1234"}
	for _, name := range []string{"Frontend", "decode", "prefill"} {
		pool.Services = append(pool.Services, backends.ServiceWorkload{Key: backends.Key{Service: name, Hash: "abcd1234"},
			Spec: dgd.Spec.Services[name], Replicas: 1, InPlace: name == "Frontend"})
	}
	ctx := context.Background()
	if err := b.Ensure(ctx, dgd, pool); err != nil {
		t.Fatal(err)
	}
	var pcss grovev1.PodCliqueSetList
	if err := c.List(ctx, &pcss, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*grovev1.PodCliqueSet{}
	for i := range pcss.Items {
		p := &pcss.Items[i]
		byName[p.Name] = p
		if v := harness.GroveRejects(nil, p); len(v) > 0 {
			t.Errorf("%s is rejected on create: %q", p.Name, v)
		}
	}
	workers, fe := byName["g"], byName["g-1"]
	if len(byName) != 2 || workers == nil || fe == nil {
		t.Fatalf("PodCliqueSets %v, want the workers' g and the frontend's g-1", byName)
	}
	withFrontend := workers.DeepCopy()
	withFrontend.Spec.Template.Cliques = append(withFrontend.Spec.Template.Cliques, fe.Spec.Template.Cliques[0].DeepCopy())
	if got := strings.Join(harness.GroveRejects(workers, withFrontend), "; "); !strings.Contains(got, "not allowed to change clique composition") {
		t.Errorf("the frontend added to the live workers' PodCliqueSet: %q, want Grove's refusal", got)
	}
}
