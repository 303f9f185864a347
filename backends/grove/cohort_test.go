package grove

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	renderpkg "github.com/dgd-rollout/operator/render"
)

// cohortFixture is a Grove backend over a fake client that records scale subresource
// writes (the fake client implements none for custom resources) and gives every
// created object a creation time one second after the one before (an API server does;
// the fake client sets none), so Observe can tell the older of two PodCliqueSets.
type cohortFixture struct {
	b      *Backend
	c      client.Client
	scaled []string // "<object>=<replicas>"
}

func newCohortFixture(t *testing.T) *cohortFixture {
	t.Helper()
	f := &cohortFixture{}
	scheme := testScheme(t)
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.c = fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			created = created.Add(time.Second)
			obj.SetCreationTimestamp(metav1.NewTime(created))
			return c.Create(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			var o client.SubResourceUpdateOptions
			o.ApplyOptions(opts)
			if s, ok := o.SubResourceBody.(*autoscalingv1.Scale); ok && sub == "scale" {
				f.scaled = append(f.scaled, obj.GetName()+"="+strconv.Itoa(int(s.Spec.Replicas)))
			}
			return nil
		},
	}).Build()
	f.b = New(f.c, scheme, renderpkg.Config{})
	return f
}

// cohortDGD is a disaggregated graph with a frontend of the given image.
func cohortDGD(frontendImage string) *v1alpha1.DynamoGraphDeployment {
	fe := svc(v1alpha1.ComponentTypeFrontend, 1)
	fe.Replicas = ptr.To[int32](2)
	fe.ExtraPodSpec.MainContainer.Image = frontendImage
	return namesDGD("g", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
		"Frontend": fe, "prefill": svc(v1alpha1.ComponentTypePrefill, 1), "decode": svc(v1alpha1.ComponentTypeDecode, 1),
	})
}

// cohortPool is the pool decide writes for a new revision in cohort form: the frontend
// (InPlace) with the workers.
func cohortPool(dgd *v1alpha1.DynamoGraphDeployment, hash string) backends.Pool {
	p := backends.Pool{Hash: hash}
	for _, name := range []string{"Frontend", "decode", "prefill"} {
		p.Services = append(p.Services, backends.ServiceWorkload{Key: backends.Key{Service: name, Hash: hash},
			Spec: dgd.Spec.Services[name], Replicas: 2, InPlace: name == "Frontend"})
	}
	return p
}

func (f *cohortFixture) sets(t *testing.T) map[string]grovev1.PodCliqueSet {
	t.Helper()
	var list grovev1.PodCliqueSetList
	if err := f.c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]grovev1.PodCliqueSet{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

func (f *cohortFixture) observe(t *testing.T, dgd *v1alpha1.DynamoGraphDeployment) map[string]backends.Workload {
	t.Helper()
	ws, err := f.b.Observe(context.Background(), dgd)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]backends.Workload{}
	for _, w := range ws {
		out[w.Name] = w
	}
	return out
}

// TestCohortFrontendOwnPodCliqueSet: a revision's pool with its cohort frontend makes
// two PodCliqueSets, the workers' `{dgd}` without the frontend and the frontend's own
// (from `{dgd}-1`: one standalone clique of minAvailable 1, labelled with the service,
// the worker hash and the template), under the name Name gave before; Observe reports
// the frontend as {Frontend, hash} grouped under its own PodCliqueSet.
func TestCohortFrontendOwnPodCliqueSet(t *testing.T) {
	f := newCohortFixture(t)
	ctx := context.Background()
	dgd := cohortDGD("fe:1")
	key := backends.Key{Service: "Frontend", Hash: "aaaaaaaa"}
	named := f.b.Name(dgd, key)
	if err := f.b.Ensure(ctx, dgd, cohortPool(dgd, "aaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	sets := f.sets(t)
	if len(sets) != 2 {
		t.Fatalf("PodCliqueSets %v, want the workers' and the frontend's", keysOf(sets))
	}
	if got := names(sets["g"].Spec.Template); got != "decode prefill" {
		t.Errorf("the workers' PodCliqueSet g holds %q, want decode and prefill only", got)
	}
	fe, ok := sets["g-1"]
	if !ok {
		t.Fatalf("no frontend PodCliqueSet g-1: %v", keysOf(sets))
	}
	if named != "g-1-0-frontend" {
		t.Errorf("Name before the create: %q, want g-1-0-frontend", named)
	}
	for k, want := range map[string]string{v1alpha1.LabelService: "Frontend", v1alpha1.LabelWorkerHash: "aaaaaaaa", v1alpha1.LabelGraph: "g"} {
		if fe.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, fe.Labels[k], want)
		}
	}
	if fe.Labels[LabelStableHash] == "" {
		t.Error("no template label")
	}
	if c := fe.Spec.Template.Cliques; len(c) != 1 || c[0].Name != "frontend" || c[0].Spec.Replicas != 2 || ptr.Deref(c[0].Spec.MinAvailable, 0) != 1 || len(fe.Spec.Template.PodCliqueScalingGroupConfigs) != 0 {
		t.Errorf("frontend template %q: want one standalone clique frontend, replicas 2, minAvailable 1", names(fe.Spec.Template))
	}
	ws := f.observe(t, dgd)
	w, ok := ws["g-1-0-frontend"]
	if !ok || w.Key != key || w.Group == nil || w.Group.Name != "g-1" || w.Kind != "PodClique" || w.Outdated || w.Relabel != nil {
		t.Errorf("observed frontend %+v, want key %v in group g-1, not outdated", w, key)
	}
	if w := ws["g-0-decode"]; w.Group == nil || w.Group.Name != "g" {
		t.Errorf("decode observed %+v, want in g", w)
	}
	if got := f.b.Name(dgd, backends.Key{Service: "decode", Hash: "aaaaaaaa"}); got != "g-0-decode" {
		t.Errorf("the workers' name: %q, want g-0-decode (the frontend's PodCliqueSet carries the hash too)", got)
	}
}

// TestCohortPreludeName: the prelude makes the running revision's frontend from that
// revision's template while the spec holds the next one; Name (from the spec) and
// Ensure (from the revision) agree on the name, and the pool holding only the frontend
// leaves the revision's live worker PodCliqueSet untouched (Grove refuses a clique
// added to it).
func TestCohortPreludeName(t *testing.T) {
	f := newCohortFixture(t)
	ctx := context.Background()
	was := cohortDGD("fe:1")
	if err := f.b.Ensure(ctx, was, backends.Pool{Hash: "aaaaaaaa", Services: cohortPool(was, "aaaaaaaa").Services[1:]}); err != nil {
		t.Fatal(err)
	}
	workers := f.sets(t)["g"]
	dgd := cohortDGD("fe:2") // the upgrade's frontend
	key := backends.Key{Service: "Frontend", Hash: "aaaaaaaa"}
	named := f.b.Name(dgd, key)
	pool := backends.Pool{Hash: "aaaaaaaa", Services: []backends.ServiceWorkload{{Key: key, Spec: was.Spec.Services["Frontend"], Replicas: 2, InPlace: true}}}
	if err := f.b.Ensure(ctx, dgd, pool); err != nil {
		t.Fatal(err)
	}
	sets := f.sets(t)
	if got := sets["g"]; got.ResourceVersion != workers.ResourceVersion {
		t.Errorf("the workers' PodCliqueSet was written (resourceVersion %s -> %s)", workers.ResourceVersion, got.ResourceVersion)
	}
	fe, ok := sets["g-1"]
	if !ok || named != "g-1-0-frontend" {
		t.Fatalf("Name said %q, PodCliqueSets %v: want the frontend created as g-1", named, keysOf(sets))
	}
	if img := fe.Spec.Template.Cliques[0].Spec.PodSpec.Containers[0].Image; img != "fe:1" {
		t.Errorf("the prelude's frontend runs %s, want the running revision's fe:1", img)
	}
	if w := f.observe(t, dgd)["g-1-0-frontend"]; w.Outdated {
		t.Error("a cohort's only frontend is outdated against the spec's: an old cohort keeps its own")
	}
}

// TestCohortFrontendSideBySide: a frontend-only change makes a PodCliqueSet of the new
// template beside the old one (never a template write to either: Grove's
// RollingRecreate would delete the one pod first); Observe reports the old one
// Outdated, on the update revision already before the new one exists (an old cohort's
// only one never); Scale of each observed workload scales its own PodClique; Ensure again
// writes nothing; the spec back to the old template makes the old one current.
func TestCohortFrontendSideBySide(t *testing.T) {
	f := newCohortFixture(t)
	ctx := context.Background()
	dgd := cohortDGD("fe:1")
	if err := f.b.Ensure(ctx, dgd, cohortPool(dgd, "aaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	key := backends.Key{Service: "Frontend", Hash: "aaaaaaaa"}
	old := f.sets(t)["g-1"]
	dgd = cohortDGD("fe:2")
	dgd.Status.UpdateWorkerHash = "bbbbbbbb"
	if f.observe(t, dgd)["g-1-0-frontend"].Outdated {
		t.Error("an old cohort's only frontend is outdated against the spec's frontend")
	}
	dgd.Status.UpdateWorkerHash = "aaaaaaaa"
	if !f.observe(t, dgd)["g-1-0-frontend"].Outdated {
		t.Error("the update revision's only frontend runs another template than the spec's: want it outdated before its replacement is made")
	}
	fe := backends.Pool{Hash: "aaaaaaaa", Services: []backends.ServiceWorkload{{Key: key, Spec: dgd.Spec.Services["Frontend"], Replicas: 2, InPlace: true}}}
	for range 2 {
		if err := f.b.Ensure(ctx, dgd, fe); err != nil {
			t.Fatal(err)
		}
	}
	sets := f.sets(t)
	if len(sets) != 3 || sets["g-1"].ResourceVersion != old.ResourceVersion {
		t.Fatalf("PodCliqueSets %v (g-1 at %s, was %s): want g-2 beside an untouched g-1", keysOf(sets), sets["g-1"].ResourceVersion, old.ResourceVersion)
	}
	if img := sets["g-2"].Spec.Template.Cliques[0].Spec.PodSpec.Containers[0].Image; img != "fe:2" {
		t.Errorf("g-2 runs %s, want fe:2", img)
	}
	ws := f.observe(t, dgd)
	if !ws["g-1-0-frontend"].Outdated || ws["g-2-0-frontend"].Outdated || ws["g-2-0-frontend"].Key != key {
		t.Errorf("observed g-1 outdated %v, g-2 outdated %v: want the old one only", ws["g-1-0-frontend"].Outdated, ws["g-2-0-frontend"].Outdated)
	}
	if got := f.b.Name(dgd, key); got != "g-2-0-frontend" {
		t.Errorf("Name: %q, want the current template's g-2-0-frontend", got)
	}
	for _, c := range []client.Object{
		&grovev1.PodClique{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-1-0-frontend", OwnerReferences: ownerOf(sets["g-1"])}, Spec: grovev1.PodCliqueSpec{Replicas: 2}},
		&grovev1.PodClique{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-2-0-frontend", OwnerReferences: ownerOf(sets["g-2"])}, Spec: grovev1.PodCliqueSpec{Replicas: 2}},
	} {
		if err := f.c.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"g-1-0-frontend", "g-2-0-frontend"} {
		if err := f.b.Scale(ctx, dgd, ws[name], 1); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(f.scaled)
	if got := f.scaled; len(got) != 2 || got[0] != "g-1-0-frontend=1" || got[1] != "g-2-0-frontend=1" {
		t.Errorf("scaled %v, want each observed workload's own PodClique once", got)
	}
	if ws := f.observe(t, cohortDGD("fe:1")); ws["g-1-0-frontend"].Outdated || !ws["g-2-0-frontend"].Outdated {
		t.Error("the spec back on fe:1: want g-2 outdated, g-1 current")
	}
}

// TestCohortFrontendStripped: a cohort frontend's PodCliqueSet stripped of its labels
// and annotations is still told from its revision's workers (its clique is a
// frontend's), found again under its identity, and its labels are reported to put back,
// the template's hash recomputed from the template as written.
func TestCohortFrontendStripped(t *testing.T) {
	f := newCohortFixture(t)
	ctx := context.Background()
	dgd := cohortDGD("fe:1")
	if err := f.b.Ensure(ctx, dgd, cohortPool(dgd, "aaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	fe := f.sets(t)["g-1"]
	labels := fe.Labels
	fe.Labels, fe.Annotations = nil, nil
	if err := f.c.Update(ctx, &fe); err != nil {
		t.Fatal(err)
	}
	f.b.picked = picks{} // a restart
	w := f.observe(t, dgd)["g-1-0-frontend"]
	if w.Key != (backends.Key{Service: "Frontend", Hash: "aaaaaaaa"}) || w.Outdated {
		t.Errorf("observed %+v, want the frontend at aaaaaaaa", w)
	}
	for k, v := range labels {
		if w.Relabel[k] != v {
			t.Errorf("relabel %s = %q, want %q", k, w.Relabel[k], v)
		}
	}
	if got := f.b.Name(dgd, w.Key); got != "g-1-0-frontend" {
		t.Errorf("Name: %q, want the stripped one found again", got)
	}
	if got := f.b.Name(dgd, backends.Key{Service: "prefill", Hash: "aaaaaaaa"}); got != "g-0-prefill" {
		t.Errorf("the workers' Name: %q, want g-0-prefill", got)
	}
}

// TestCohortScaleOfDeletedSet: a PodCliqueSet being deleted is never scaled (its
// cliques at 0 would make Grove warn AllScheduledReplicasLost).
func TestCohortScaleOfDeletedSet(t *testing.T) {
	f := newCohortFixture(t)
	ctx := context.Background()
	dgd := cohortDGD("fe:1")
	if err := f.b.Ensure(ctx, dgd, cohortPool(dgd, "aaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	fe := f.sets(t)["g-1"]
	fe.Finalizers = []string{"grove.io/podcliqueset.grove.io"}
	if err := f.c.Update(ctx, &fe); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(ctx, &fe); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Create(ctx, &grovev1.PodClique{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-1-0-frontend", OwnerReferences: ownerOf(fe)}, Spec: grovev1.PodCliqueSpec{Replicas: 2}}); err != nil {
		t.Fatal(err)
	}
	w := backends.Workload{Key: backends.Key{Service: "Frontend", Hash: "aaaaaaaa"}, Name: "g-1-0-frontend", Group: &backends.ObjectRef{Kind: Kind, Name: "g-1"}}
	if err := f.b.Scale(ctx, dgd, w, 0); err != nil {
		t.Fatal(err)
	}
	if len(f.scaled) != 0 {
		t.Errorf("scaled %v in a PodCliqueSet being deleted", f.scaled)
	}
}

func ownerOf(pcs grovev1.PodCliqueSet) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: grovev1.SchemeGroupVersion.String(), Kind: Kind, Name: pcs.Name, UID: pcs.UID, Controller: ptr.To(true)}}
}

func keysOf(m map[string]grovev1.PodCliqueSet) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// names lists a template's cliques, sorted.
func names(t grovev1.PodCliqueSetTemplateSpec) string {
	var out []string
	for _, c := range t.Cliques {
		out = append(out, c.Name)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
