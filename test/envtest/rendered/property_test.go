// Package rendered_test is issue 23's property test of admission against rendering: for
// random DynamoGraphDeployments (v1alpha1 and v1beta1, sized by the CRD's own schema
// bounds: long DGD and namespace names, many services, counts up to and past their
// maximums), either the API server refuses the DGD at admission, naming the field, or
// every object the operator's first pass writes for it is accepted by the API server
// (server-side dry run, with the CRDs of LWS and Grove installed), by Grove's webhook
// rules (harness.GroveRejects) and, for the objects LWS and the StatefulSet controller
// derive from a LeaderWorkerSet's name, by the API server's name and label rules; and
// the pass reports no InvalidSpec or NameConflict; and the pod templates the
// LeaderWorkerSets and PodCliqueSets carry (which the API server checks only when LWS
// and Grove make StatefulSets and pods of them) are what the API server takes of a
// Deployment's. Any third outcome fails the test.
//
// Every user string the operator copies into what it writes is a slot of the generator
// (strings_test.go, docs/reference.md "Strings the operator writes"): every DGD gets
// valid values of its slots, odd ones included, and a third of them, the string cases,
// get one slot invalid. A string case refused at admission whose twin (the same DGD with
// that string valid) is admitted must be refused naming that string's field.
//
// The pass is the operator's own (controllers.Reconciler.Reconcile: observe, decide,
// execute, report) over a client that sends every write as a dry run: the first pass
// of a new DGD renders everything it has (its revision, RBAC, ConfigMaps, SSH key,
// every workload of the stable services and of the first worker revision, the
// Services and the Ingress) without a controller to play.
//
// RENDERED_CASES (default 300) and RENDERED_SEED (default: fixed) choose the cases; the
// seed is printed, and every failure names its case's seed and spec.
package rendered_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
	grovecrds "github.com/dgd-rollout/operator/test/grove"
	"github.com/dgd-rollout/operator/test/harness"
	lwscrds "github.com/dgd-rollout/operator/test/lws"
)

var env *harness.Env

func TestMain(m *testing.M) {
	dir, err := grovecrds.CRDDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if env, err = harness.Start(false, append(lwscrds.CRDPaths(), dir)...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// bounds are the CRD schema's limits the generator sizes its DGDs by (and goes one past,
// to see them refused): read from config/crd, so a changed bound changes the cases.
type bounds struct {
	services, components, nameLen, replicas, nodeCount int
}

func schemaBounds(t *testing.T) bounds {
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "crd", "bases", "nvidia.com_dynamographdeployments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct{ OpenAPIV3Schema map[string]any } `json:"schema"`
			}
		}
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	at := func(version string, path ...string) int {
		for _, v := range crd.Spec.Versions {
			if v.Name != version {
				continue
			}
			var node any = v.Schema.OpenAPIV3Schema
			for _, p := range path {
				m, _ := node.(map[string]any)
				node = m[p]
			}
			if f, ok := node.(float64); ok {
				return int(f)
			}
		}
		t.Fatalf("no %s in the %s schema", strings.Join(path, "."), version)
		return 0
	}
	svc := []string{"properties", "spec", "properties", "services", "additionalProperties", "properties"}
	comp := []string{"properties", "spec", "properties", "components", "items", "properties"}
	b := bounds{
		services:   at("v1alpha1", "properties", "spec", "properties", "services", "maxProperties"),
		components: at("v1beta1", "properties", "spec", "properties", "components", "maxItems"),
		nameLen:    at("v1beta1", append(comp, "name", "maxLength")...),
		replicas:   at("v1alpha1", append(svc, "replicas", "maximum")...),
		nodeCount:  at("v1alpha1", append(svc, "multinode", "properties", "nodeCount", "maximum")...),
	}
	if r := at("v1beta1", append(comp, "replicas", "maximum")...); r != b.replicas {
		t.Fatalf("replicas maximum differs between versions: v1alpha1 %d, v1beta1 %d", b.replicas, r)
	}
	return b
}

// gen makes one random DGD.
type gen struct {
	r *rand.Rand
	b bounds
	// beta: the DGD is created in v1beta1, which has no ingress field (Dynamo's
	// v1beta1 keeps a v1alpha1 ingress only in the conversion's nvidia.com/dgd-spec
	// annotation, which no schema rule can read): no ingress is generated, nor any
	// other v1alpha1-only string (slot.alphaOnly).
	beta bool
	// strs is the DGD's string plan (strings_test.go).
	strs strsPlan
	// grove: the DGD's backend is Grove (whose webhook is stricter on env names).
	grove bool
}

const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	digits = "0123456789"
)

func (g gen) pick(s string) byte { return s[g.r.IntN(len(s))] }

// length is mostly short, often at or near max.
func (g gen) length(max int) int {
	switch g.r.IntN(3) {
	case 0:
		return max - g.r.IntN(min(max, 12))
	default:
		return 1 + g.r.IntN(min(max, 16))
	}
}

// label is a DNS-1123 label of n characters from alphabet first/rest.
func (g gen) label(n int, first, rest string) string {
	b := []byte{g.pick(first)}
	for len(b) < n {
		c := g.pick(rest)
		if len(b) == n-1 && (c == '-' || c == '.') {
			c = g.pick(lower + digits)
		}
		if c == '.' && b[len(b)-1] == '.' || c == '.' && b[len(b)-1] == '-' || c == '-' && b[len(b)-1] == '.' {
			c = g.pick(lower)
		}
		b = append(b, c)
	}
	return string(b)
}

func (g gen) count(max int) int32 {
	switch g.r.IntN(10) {
	case 0:
		return int32(max + 1 - g.r.IntN(3)) // at the bound, or one past it
	case 1:
		return int32(g.r.IntN(max + 1))
	default:
		return int32(g.r.IntN(5))
	}
}

func (g gen) dgd(i int) *v1alpha1.DynamoGraphDeployment {
	d := &v1alpha1.DynamoGraphDeployment{}
	d.Name = g.label(g.length(63), lower+digits, lower+digits+"-.")
	d.Namespace = fmt.Sprintf("p%d-", i)
	d.Namespace += g.label(max(1, g.length(63-len(d.Namespace))), lower, lower+digits+"-")
	d.Spec.Backend = []v1alpha1.BackendType{v1alpha1.BackendAuto, v1alpha1.BackendDeployment, v1alpha1.BackendLeaderWorkerSet, v1alpha1.BackendGrove}[g.r.IntN(4)]
	g.grove = d.Spec.Backend == v1alpha1.BackendGrove
	framework := []string{"vllm", "sglang", "trtllm"}[min(g.r.IntN(7)/3, 2)]
	n := 1 + g.r.IntN(4)
	if g.r.IntN(4) == 0 {
		n = 1 + g.r.IntN(min(g.b.services, g.b.components))
	}
	d.Spec.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{}
	for len(d.Spec.Services) < n {
		name := g.label(g.length(g.b.nameLen), lower+strings.ToUpper(lower)+digits, lower+strings.ToUpper(lower)+digits+"-")
		dup := false
		for k := range d.Spec.Services {
			dup = dup || strings.EqualFold(k, name)
		}
		if dup {
			continue
		}
		svc := g.service(framework, len(d.Spec.Services) == 0)
		for _, other := range d.Spec.Services {
			if svc.ComponentType == "epp" && other.ComponentType == "epp" {
				svc.ComponentType = "worker" // at most one epp (Dynamo's v1beta1 rule)
			}
		}
		d.Spec.Services[name] = svc
	}
	g.graphStrings(d)
	return d
}

// service makes one service of the DGD (the first of them when first).
func (g gen) service(framework string, first bool) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	types := []string{"frontend", "worker", "prefill", "decode", "planner", "worker", "router.v2"}
	if g.beta {
		types[6] = "epp" // v1beta1's type is an enum (Dynamo's), of at most one epp
	}
	// A string case whose bad slot is the Ingress's needs an enabled Ingress with a
	// valid host: the first service is a frontend with one.
	ingressCase := strings.HasPrefix(g.strs.bad, "Ingress")
	componentType := types[g.r.IntN(len(types))]
	if ingressCase && first {
		componentType = v1alpha1.ComponentTypeFrontend
	}
	s := &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ComponentType: componentType,
		Replicas:      ptr.To(g.count(g.b.replicas)),
		ExtraPodSpec:  &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: "nvcr.io/nvidia/ai-dynamo/" + framework + "-runtime:0.6.1"}},
	}
	if s.IsWorker() {
		s.ExtraPodSpec.MainContainer.Command = []string{"python3"}
		s.ExtraPodSpec.MainContainer.Args = []string{"-m", "dynamo." + framework, "--model", "Qwen/Qwen3-0.6B"}
		if g.r.IntN(3) == 0 {
			s.Multinode = &v1alpha1.MultinodeSpec{NodeCount: max(2, g.count(g.b.nodeCount))}
			s.Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "8"}}
		}
	}
	if s.ComponentType == "frontend" && !g.beta && (g.r.IntN(3) == 0 || ingressCase) {
		in := &v1alpha1.IngressSpec{Enabled: true, Host: g.label(g.length(63), lower+digits, lower+digits+"-.")}
		switch v := g.r.IntN(4); {
		case ingressCase:
		case v == 0:
			in.Host = "My_Graph" // the issue's
		case v == 1:
			in.HostPrefix = ptr.To(g.label(g.length(63), lower, lower+digits+"-.") + ".")
			in.HostSuffix = ptr.To(g.label(g.length(200), lower, lower+digits+"-."))
		}
		g.ingressStrings(in)
		s.Ingress = in
	}
	g.serviceStrings(s)
	return s
}

// dryRun is a client that sends every write as a server-side dry run, records what it
// sent and every error, and keeps the DGD's last status write.
type dryRun struct {
	mu      sync.Mutex
	written []client.Object
	errs    []string
	status  *metav1.Condition
}

func (d *dryRun) record(obj client.Object, err error, verb string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.errs = append(d.errs, fmt.Sprintf("%s %T %s: %v", verb, obj, obj.GetName(), err))
		return err
	}
	d.written = append(d.written, obj.DeepCopyObject().(client.Object))
	return nil
}

func (d *dryRun) client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return d.record(obj, c.Create(ctx, obj, append(opts, client.DryRunAll)...), "create")
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return d.record(obj, c.Update(ctx, obj, append(opts, client.DryRunAll)...), "update")
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return d.record(obj, c.Patch(ctx, obj, p, append(opts, client.DryRunAll)...), "patch")
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return d.record(obj, c.Delete(ctx, obj, append(opts, client.DryRunAll)...), "delete")
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, append(opts, client.DryRunAll)...)
			if dgd, ok := obj.(*v1beta1.DynamoGraphDeployment); ok && sub == "status" && err == nil {
				d.mu.Lock()
				d.status = meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionReady)
				d.mu.Unlock()
			}
			return d.record(obj, err, "update "+sub)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return d.record(obj, c.SubResource(sub).Patch(ctx, obj, p, append(opts, client.DryRunAll)...), "patch "+sub)
		},
	})
}

// reconciler is the operator's reconciler as app.NewReconciler wires it (the
// converting client, every backend), over c.
func reconciler(c client.WithWatch, platform render.Config) *controllers.Reconciler {
	s := c.Scheme()
	reader := env.Client
	l := lws.New(c, s, platform)
	l.Reader = reader
	g := grove.New(c, s, platform)
	g.Reader = reader
	return &controllers.Reconciler{
		Client:    conversion.NewClient(c),
		APIReader: conversion.Reader{Reader: reader},
		Scheme:    s,
		Recorder:  &events.FakeRecorder{},
		Backends: backends.NewRegistry().
			Register(v1alpha1.BackendDeployment, deployment.New(c, reader, s, platform)).
			Register(v1alpha1.BackendLeaderWorkerSet, l).
			Register(v1alpha1.BackendGrove, g),
		History:  revisions.NewHistory(c, s),
		Platform: platform,
		Now:      func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
}

// lwsDerived reports the names LWS v0.9.0 and the StatefulSet controller derive from
// a LeaderWorkerSet that the API server would refuse, at the largest group index
// admission allows: the leader StatefulSet `<lws>` and the worker StatefulSet of group
// i `<leader pod> = <lws>-<i>` (pkg/controllers/leaderworkerset_controller.go
// constructLeaderStatefulSetApplyConfiguration, pod_controller.go
// constructWorkerStatefulSetApplyConfiguration), their pods `<sts>-<ordinal>` whose
// hostname is their name (a DNS-1123 label), and every pod's controller-revision-hash
// `<sts>-<hash>` (k8s.io/kubernetes pkg/controller/history ControllerRevisionName; the
// hash a decimal uint32 rand.SafeEncodeString'd, up to 10 characters); and the LWS
// name itself, which LWS's webhook takes only as a DNS-1035 label
// (pkg/webhooks/leaderworkerset_webhook.go ValidateCreate).
func lwsDerived(l *lwsv1.LeaderWorkerSet, maxReplicas int) []string {
	var bad []string
	check := func(what string, errs []string) {
		if len(errs) > 0 {
			bad = append(bad, what+": "+strings.Join(errs, "; "))
		}
	}
	check("LeaderWorkerSet name "+l.Name, validation.IsDNS1035Label(l.Name))
	hash := strings.Repeat("b", 10)
	group := strconv.Itoa(maxReplicas - 1)
	size := int(ptr.Deref(l.Spec.LeaderWorkerTemplate.Size, 1))
	leaderPod := l.Name + "-" + group
	check("leader pod "+leaderPod, validation.IsDNS1123Label(leaderPod))
	check("leader controller-revision-hash", validation.IsValidLabelValue(l.Name+"-"+hash))
	if size > 1 {
		worker := leaderPod + "-" + strconv.Itoa(size-1)
		check("worker pod "+worker, validation.IsDNS1123Label(worker))
		check("worker controller-revision-hash", validation.IsValidLabelValue(leaderPod+"-"+hash))
	}
	return bad
}

func TestAdmittedDGDsRender(t *testing.T) {
	b := schemaBounds(t)
	cases, seed := 300, uint64(23)
	if v, err := strconv.Atoi(os.Getenv("RENDERED_CASES")); err == nil {
		cases = v
	}
	if v, err := strconv.ParseUint(os.Getenv("RENDERED_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (RENDERED_SEED), %d cases (RENDERED_CASES), bounds %+v", seed, cases, b)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	accepted, refused, stringCases := 0, 0, 0
	decisive, masked := tally{}, tally{}
	for i := range cases {
		caseSeed := seed*1_000_003 + uint64(i)
		// A third of the cases are string cases: one slot invalid (strings_test.go).
		// The twin is the same DGD with that slot valid: the same random numbers, all
		// but one string alike.
		build := func(invalid bool) (*v1alpha1.DynamoGraphDeployment, bool, string) {
			g := gen{r: rand.New(rand.NewPCG(caseSeed, caseSeed)), b: b}
			g.beta = g.r.IntN(2) == 0
			if g.r.IntN(3) == 0 {
				g.strs = strsPlan{bad: badSlot(i, g.beta), invalid: invalid}
			}
			return g.dgd(i), g.beta, g.strs.bad
		}
		dgd, beta, bad := build(true)
		twin, _, _ := build(false)
		if bad != "" {
			stringCases++
		}
		ok, why, refusal := runCase(t, base, dgd, beta)
		spec := func() string { j, _ := json.Marshal(dgd); return string(j) }
		switch {
		case ok:
			accepted++
			if bad != "" && !equality.Semantic.DeepEqual(dgd, twin) {
				t.Errorf("case %d (seed %d, v1beta1 %v): an invalid %s was admitted and rendered: the slot's values or its api are wrong\nDGD %s/%s: %s",
					i, caseSeed, beta, bad, dgd.Namespace, dgd.Name, spec())
			}
		case why == "":
			refused++
			if bad == "" || equality.Semantic.DeepEqual(dgd, twin) {
				break
			}
			// Refused with one string invalid: when the twin is admitted, that string
			// is the reason, and the refusal must name its field.
			if admitted, err := dryRunCreate(base, twin, beta); err != nil {
				t.Fatalf("case %d: %v", i, err)
			} else if !admitted {
				masked[bad]++
			} else if !slotByName[bad].field.MatchString(refusal) {
				t.Errorf("case %d (seed %d, v1beta1 %v): the DGD with only its %s invalid was refused without naming it (want %s): %s\nDGD %s/%s: %s",
					i, caseSeed, beta, bad, slotByName[bad].field, refusal, dgd.Namespace, dgd.Name, spec())
			} else {
				decisive[bad]++
			}
		default:
			t.Errorf("case %d (seed %d, v1beta1 %v, invalid string: %q): admitted but %s\nDGD %s/%s: %s", i, caseSeed, beta, bad, why, dgd.Namespace, dgd.Name, spec())
		}
	}
	t.Logf("%d admitted and rendered, %d refused at admission; %d string cases", accepted, refused, stringCases)
	for msg, n := range refusals {
		t.Logf("refused %3d times: %s", n, msg)
	}
	for _, s := range slots {
		t.Logf("slot %-24s refused for it alone %2d times (masked by another refusal %d)", s.name, decisive[s.name], masked[s.name])
	}
	// With enough cases every slot has been the one string that made admission refuse
	// a DGD (2,000 cases give each some 15 string cases, of which a third to a half
	// are not refused for something else too).
	if cases >= 2000 {
		for _, s := range slots {
			if decisive[s.name] == 0 {
				t.Errorf("slot %s never was the one invalid string of a refused DGD in %d cases", s.name, cases)
			}
		}
	}
	// String cases are meant to be refused: the balance is the other cases'.
	if accepted < (cases-stringCases)/3 || refused < cases/20 {
		t.Errorf("the generator lost its balance: %d admitted, %d refused of %d", accepted, refused, cases)
	}
}

// dryRunCreate reports whether admission takes dgd (in v1beta1 when beta), without
// creating it.
func dryRunCreate(c client.Client, dgd *v1alpha1.DynamoGraphDeployment, beta bool) (bool, error) {
	var obj client.Object = dgd.DeepCopy()
	if beta {
		hub := &v1beta1.DynamoGraphDeployment{}
		if err := conversion.ToHub(dgd.DeepCopy(), hub); err != nil {
			return false, err
		}
		obj = hub
	}
	err := c.Create(context.Background(), obj, client.FieldValidation("Strict"), client.DryRunAll)
	if apierrors.IsInvalid(err) {
		return false, nil
	}
	return err == nil, err
}

// refusals tallies what admission refused, by the message after the object's name,
// for the log: a refusal the generator did not mean shows there.
var refusals = tally{}

type tally map[string]int

func (t tally) add(msg string) {
	_, msg, _ = strings.Cut(msg, " is invalid: ")
	for _, field := range strings.Split(strings.Trim(msg, "[]"), ", spec.") {
		field = fieldName.ReplaceAllString(field, "$1[*]")
		if i := strings.Index(field, "Invalid value: "); i > 0 {
			field = field[:i] + strings.TrimLeft(valueOf.ReplaceAllString(field[i:], ""), " :")
		}
		field = strings.TrimPrefix(field, "spec.")
		t[field[:min(len(field), 110)]]++
	}
}

var (
	fieldName = regexp.MustCompile(`(services|components)(\[[^]]*\]|\.[A-Za-z0-9-]+)`)
	valueOf   = regexp.MustCompile(`^Invalid value: ("[^"]*"|[0-9]+|"object")`)
)

// runCase creates the DGD (in v1beta1 when beta) and, when admitted, runs the
// operator's first pass over it with every write a dry run. It reports true when the
// DGD was admitted and rendered; false, "" and the refusal when admission refused it,
// naming a field; false and why for a third outcome.
func runCase(t *testing.T, base client.WithWatch, dgd *v1alpha1.DynamoGraphDeployment, beta bool) (bool, string, string) {
	ctx := context.Background()
	if err := base.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dgd.Namespace}}); err != nil {
		t.Fatalf("namespace %s: %v", dgd.Namespace, err)
	}
	var obj client.Object = dgd.DeepCopy()
	if beta {
		hub := &v1beta1.DynamoGraphDeployment{}
		if err := conversion.ToHub(dgd.DeepCopy(), hub); err != nil {
			t.Fatal(err)
		}
		obj = hub
	}
	err := base.Create(ctx, obj, client.FieldValidation("Strict"))
	switch {
	case apierrors.IsInvalid(err):
		if !strings.Contains(err.Error(), "spec.") && !strings.Contains(err.Error(), "metadata.") {
			return false, "refused without naming a field: " + err.Error(), ""
		}
		refusals.add(err.Error())
		return false, "", err.Error()
	case err != nil:
		return false, "refused by something other than validation: " + err.Error(), ""
	}
	d := &dryRun{}
	platform := render.Config{DiscoveryBackend: render.DiscoveryKubernetes}
	r := reconciler(d.client(base), platform)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: dgd.Namespace, Name: dgd.Name}}); err != nil {
		return false, "the pass failed: " + err.Error(), ""
	}
	var bad []string
	bad = append(bad, d.errs...)
	if d.status == nil {
		bad = append(bad, "no status written")
	} else if d.status.Reason == v1alpha1.ReasonInvalidSpec || d.status.Reason == v1alpha1.ReasonNameConflict {
		bad = append(bad, "status "+d.status.Reason+": "+d.status.Message)
	}
	workloads := 0
	for _, o := range d.written {
		switch w := o.(type) {
		case *lwsv1.LeaderWorkerSet:
			workloads++
			bad = append(bad, lwsDerived(w, v1alpha1.MaxReplicas)...)
			if t := w.Spec.LeaderWorkerTemplate.LeaderTemplate; t != nil {
				bad = append(bad, podTemplateRefused(base, dgd.Namespace, "LeaderWorkerSet "+w.Name+" leader", *t)...)
			}
			bad = append(bad, podTemplateRefused(base, dgd.Namespace, "LeaderWorkerSet "+w.Name+" worker", w.Spec.LeaderWorkerTemplate.WorkerTemplate)...)
		case *grovev1.PodCliqueSet:
			workloads++
			bad = append(bad, harness.GroveRejects(nil, w)...)
			for _, c := range w.Spec.Template.Cliques {
				bad = append(bad, podTemplateRefused(base, dgd.Namespace, "PodCliqueSet "+w.Name+" clique "+c.Name,
					corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: c.Labels, Annotations: c.Annotations}, Spec: c.Spec.PodSpec})...)
			}
		case *appsv1.Deployment:
			workloads++
		}
	}
	pods := int32(0) // a graph of workers at 0 replicas has no workload yet
	for _, svc := range dgd.Spec.Services {
		if !svc.IsWorker() || svc.DesiredReplicas() > 0 {
			pods++
		}
	}
	if workloads == 0 && pods > 0 && len(bad) == 0 {
		bad = append(bad, "no workload written")
	}
	if len(bad) > 0 {
		return false, strings.Join(bad, "\n  "), ""
	}
	return true, "", ""
}

// podTemplateRefused is what the API server refuses of a pod template that a
// LeaderWorkerSet or a PodCliqueSet carries: the API server checks none of it when
// the operator writes them (custom resources), but the StatefulSets the LWS
// controller makes of it and the pods Grove makes of a clique are checked as a
// Deployment's template is (k8s.io/kubernetes pkg/apis/apps/validation: a
// ReplicaSet's, a StatefulSet's and a Deployment's template are each
// ValidatePodTemplateSpec with restartPolicy Always). A server-side dry run of a
// Deployment with the template says what that write would meet.
func podTemplateRefused(c client.Client, ns, what string, t corev1.PodTemplateSpec) []string {
	t = *t.DeepCopy()
	if len(t.Labels) == 0 {
		t.Labels = map[string]string{"app": "template-check"}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "template-check"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: t.Labels}, Template: t}}
	if err := c.Create(context.Background(), d, client.DryRunAll); err != nil {
		return []string{what + "'s pod template: " + err.Error()}
	}
	return nil
}
