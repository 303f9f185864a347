package decide_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// dynamoHash is the worker hash Dynamo's operator gave the graph's workers (8 hex
// characters, as Dynamo's v2 hash: DYNAMO-V1BETA1.md §3).
const dynamoHash = "0a1b2c3d"

// handover is a world in which Dynamo's operator ran the DGD before ours: its worker
// Deployments (`<dgd>-<component>-<hash>`, controlled by their DCDs: i25-handover-facts.md
// §1a) are workloads of decide.DynamoBackend in the world; its frontend Deployment
// (`<dgd>-frontend`, our frontend's name too), Services, DCDs and finalizer are in dy.
type handover struct {
	*world
	dy *decide.Dynamo
	// orphaned are the pods of Dynamo's frontend Deployment once deleted with propagation
	// Orphan: its ReplicaSet keeps them until our frontend Deployment, which adopts it,
	// has its own ready (the Deployment controller's rolling update).
	orphaned int
}

func newHandover(dgd *v1alpha1.DynamoGraphDeployment, stopped string) *handover {
	return newHandoverOn(dgd, stopped, "Deployment")
}

// newHandoverOn is newHandover with Dynamo's worker workloads of that kind: Deployments
// `<dcd>` (single-node components), or LeaderWorkerSets `<dcd>-0` whose replicas are
// gangs (multinode components: dynamocomponentdeployment_controller.go
// leaderWorkerSetName in ai-dynamo/dynamo deploy/operator/internal/controller).
func newHandoverOn(dgd *v1alpha1.DynamoGraphDeployment, stopped, kind string) *handover {
	h := &handover{world: newWorld(dgd)}
	dgd.Finalizers = []string{decide.DynamoFinalizer}
	svc := func(name string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{v1alpha1.LabelGraph: dgd.Name}}}
	}
	h.dy = &decide.Dynamo{Stopped: stopped, Finalizer: true,
		Components: []string{"g-decode-" + dynamoHash, "g-frontend", "g-prefill-" + dynamoHash},
		Stable:     []decide.DynamoStable{{Service: "Frontend", ObjectRef: backends.ObjectRef{Kind: "Deployment", Name: "g-frontend", UID: "uid-g-frontend"}}},
		Services:   []corev1.Service{svc("g-decode"), svc("g-frontend"), svc("g-prefill")},
	}
	for _, s := range []string{"decode", "prefill"} {
		name := "g-" + s + "-" + dynamoHash
		if kind == lws.Kind {
			name += "-0"
		}
		h.workloads[name] = &decide.Workload{Backend: decide.DynamoBackend, Pods: 2, Workload: backends.Workload{
			Key: backends.Key{Service: s, Hash: dynamoHash}, Kind: kind, Name: name, UID: types.UID("uid-" + name),
			Replicas: 2, Ready: 2, Updated: 2, Current: 2, Synced: true}}
	}
	return h
}

func (h *handover) snapshot() *decide.Snapshot {
	s := h.world.snapshot()
	if h.dy == nil {
		return s
	}
	dy := *h.dy
	dy.Stable, dy.Services, dy.Components = slices.Clone(dy.Stable), slices.Clone(dy.Services), slices.Clone(dy.Components)
	dy.Ingresses, dy.VirtualServices = slices.Clone(dy.Ingresses), slices.Clone(dy.VirtualServices)
	dy.Pods = h.orphaned
	for _, w := range h.workloads {
		if w.Backend == decide.DynamoBackend {
			dy.Pods += int(w.Pods)
		}
	}
	if len(dy.Stable) > 0 {
		dy.Pods++ // the frontend pod of Dynamo's Deployment
	}
	s.Dynamo = &dy
	return s
}

// pass decides one pass and plays what the writes do to Dynamo's objects; the world
// plays the rest.
func (h *handover) pass(t *testing.T) []string {
	t.Helper()
	s := h.snapshot()
	d := decide.Decide(s)
	for i := 0; i < 4 && (len(d.Needs.Holders) > 0 || len(d.Needs.Names) > 0); i++ {
		if len(d.Needs.Holders) > 0 {
			h.answerHolders(s, d.Needs.Holders)
		}
		for _, n := range d.Needs.Names { // a Grove-like backend names by reading the cluster
			h.names[n.Key] = cliqueName(h.dgd.Name, n.Key)
			if g := h.groups[n.Key]; g != "" {
				h.names[n.Key] = g + "-0-" + strings.ToLower(n.Key.Service)
			}
		}
		s.Names = maps.Clone(h.names)
		d = decide.Decide(s)
	}
	if d.Needs.Any() || d.Err != nil {
		t.Fatalf("needs %+v, error %v", d.Needs, d.Err)
	}
	for _, wr := range d.Writes {
		switch {
		case wr.Op == decide.DeleteObject && wr.Orphan:
			h.dy.Stable = slices.DeleteFunc(h.dy.Stable, func(s decide.DynamoStable) bool { return s.Name == wr.Object.GetName() })
			h.orphaned++
		case wr.Op == decide.UpdateObject && wr.Kind == "Service":
			h.dy.Services = slices.DeleteFunc(h.dy.Services, func(s corev1.Service) bool { return s.Name == wr.Object.GetName() })
			h.objects.Services = append(h.objects.Services, *wr.Object.(*corev1.Service).DeepCopy())
		case wr.Op == decide.DeleteObject && wr.Kind == "Service":
			h.dy.Services = slices.DeleteFunc(h.dy.Services, func(s corev1.Service) bool { return s.Name == wr.Object.GetName() })
		case wr.Kind == "Ingress":
			h.playIngress(t, wr)
		case wr.Op == decide.ReleaseDynamo:
			h.dy.Components, h.dy.Finalizer = nil, false
			// The garbage collector deletes what the DCDs still control.
			h.dy.Ingresses = slices.DeleteFunc(h.dy.Ingresses, func(i networkingv1.Ingress) bool { return metav1.GetControllerOf(&i) != nil })
			h.dy.VirtualServices = nil
		}
	}
	if fe := h.workloads["g-frontend"]; fe != nil && fe.Backend != decide.DynamoBackend && fe.Ready > 0 {
		h.orphaned = 0 // our frontend's rolling update replaced the adopted ReplicaSet's pod
	}
	said := h.apply(t, d, true)
	for _, w := range h.workloads {
		if w.Backend == decide.DynamoBackend {
			w.Pods = w.Replicas // Dynamo's pods go with their replicas
		}
	}
	if h.dy != nil && len(h.dy.Stable) == 0 && len(h.dy.Services) == 0 && len(h.dy.Components) == 0 && len(h.dy.Ingresses) == 0 && len(h.dy.VirtualServices) == 0 && !h.dy.Finalizer && h.orphaned == 0 {
		h.dy = nil // observe finds no sign of Dynamo's operator any more
	}
	return said
}

// serving checks the state between two passes: a ready frontend (Dynamo's, its orphaned
// pods, or ours) and, for every worker service, at least R - maxUnavailable ready
// replicas over Dynamo's workloads and ours.
func (h *handover) serving(t *testing.T, floor int32) {
	t.Helper()
	frontends := h.orphaned
	if h.dy != nil && len(h.dy.Stable) > 0 {
		frontends++
	}
	ready := map[string]int32{}
	for _, w := range h.workloads {
		if w.Hash == "" && w.Service == "Frontend" {
			frontends += int(w.Ready)
		} else if w.Hash != "" && !w.Terminating {
			ready[w.Service] += w.Ready
		}
	}
	if frontends == 0 {
		t.Errorf("no ready frontend")
	}
	for _, s := range []string{"decode", "prefill"} {
		if ready[s] < floor {
			t.Errorf("%s: %d ready, want at least %d", s, ready[s], floor)
		}
	}
}

// TestDecideDynamoHandover plays the take-over of a DGD Dynamo's operator ran (its
// namespace-scope Lease held): the spec's revision rolls out beside Dynamo's workers
// under the DGD's surge and availability (maxSurge 1, maxUnavailable 0: every worker
// service keeps 2 ready at every state), Dynamo's frontend Deployment is released
// (deleted with propagation Orphan) before ours takes its name, Dynamo's frontend
// Service is adopted, never deleted, and only once nothing of Dynamo's runs are its other
// Services, its DCDs and its finalizer removed. The transcript is
// testdata/dynamo-handover.golden (go test -run TestDecideDynamoHandover -update).
func TestDecideDynamoHandover(t *testing.T) {
	h := newHandover(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj(), "Lease dynamo-operator-namespace-scope held")
	golden(t, "dynamo-handover", h.takeOver(t))
}

// TestDecideDynamoHandoverGangs is TestDecideDynamoHandover for a graph whose prefill
// and decode are multinode (2 nodes a gang): Dynamo's operator ran them as
// LeaderWorkerSets `<dcd>-0` of 2 gangs each, ours run as our LeaderWorkerSets
// (backend Auto). The planner drains Dynamo's gangs as the old revision, whole gangs at
// a time, decode grown before prefill and prefill shrunk before decode, under the same
// surge and availability (every worker service keeps 2 ready gangs at every state), and
// deletes them once drained. The transcript is testdata/dynamo-handover-gangs.golden.
func TestDecideDynamoHandoverGangs(t *testing.T) {
	dgd := harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Multinode("prefill", 2).Multinode("decode", 2).Rollout("1", "0").Obj()
	h := newHandoverOn(dgd, "Lease dynamo-operator-namespace-scope held", lws.Kind)
	h.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment, v1alpha1.BackendLeaderWorkerSet: lwsBackend}
	got := h.takeOver(t)
	var scaled []string
	for _, l := range got {
		if strings.HasPrefix(l, "Scale ") || strings.HasPrefix(l, "DeleteWorkload ") {
			scaled = append(scaled, l)
		}
	}
	for _, want := range []string{"Scale Dynamo g-prefill-" + dynamoHash + "-0 2->1", "DeleteWorkload Dynamo g-decode-" + dynamoHash + "-0",
		"Scale LeaderWorkerSet g-decode-"} {
		if !slices.ContainsFunc(scaled, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no %q among the scales and deletions: %v", want, scaled)
		}
	}
	golden(t, "dynamo-handover-gangs", got)
}

// TestDecideDynamoHandoverShared: several live workloads of Dynamo's share one
// (service, revision 0), which the plan counts as one: Dynamo's operator stopped midway
// through its own rolling update (two worker hashes, 1 replica each), or an older Dynamo
// that ran one LeaderWorkerSet per replica (`<dcd>-0`, `<dcd>-1`, one key). Each is given
// its share of the revision's target, never the whole: at no state do a worker service's
// workloads hold more than R + maxSurge replicas (before, every one of Dynamo's was
// scaled to the revision's 2 in the first pass: 5 replicas of a service), and every
// state serves.
func TestDecideDynamoHandoverShared(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		second     func(s string) (name, hash string)
	}{
		{"two Dynamo worker hashes", "Deployment", func(s string) (string, string) { return "g-" + s + "-ffff0000", "ffff0000" }},
		{"a LeaderWorkerSet per replica", lws.Kind, func(s string) (string, string) { return "g-" + s + "-" + dynamoHash + "-1", dynamoHash }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := harness.NewDGD("ns", "g").Disagg(2, 2, "img:1")
			if c.kind == lws.Kind {
				d = d.Multinode("prefill", 2).Multinode("decode", 2)
			}
			h := newHandoverOn(d.Rollout("1", "0").Obj(), "Lease dynamo-operator-namespace-scope held", c.kind)
			h.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment, v1alpha1.BackendLeaderWorkerSet: lwsBackend}
			for _, s := range []string{"decode", "prefill"} {
				name := "g-" + s + "-" + dynamoHash
				if c.kind == lws.Kind {
					name += "-0"
				}
				w := h.workloads[name]
				w.Replicas, w.Ready, w.Updated, w.Current, w.Pods = 1, 1, 1, 1, 1
				second := *w
				second.Name, second.Hash = c.second(s)
				second.UID = types.UID("uid-" + second.Name)
				h.workloads[second.Name] = &second
			}
			var got []string
			for range 30 {
				said := h.pass(t)
				got = append(got, said...)
				h.serving(t, 2)
				for _, s := range []string{"decode", "prefill"} {
					n := int32(0)
					for _, w := range h.workloads {
						if w.Service == s && w.Hash != "" {
							n += max(w.Replicas, w.Pods)
						}
					}
					if n > 3 {
						t.Fatalf("%s: %d replicas, more than 2 + maxSurge 1, after %v", s, n, said)
					}
				}
				if h.dy == nil && len(said) == 1 && isStableEnsure(said[0]) {
					break
				}
			}
			if h.dy != nil {
				t.Fatalf("the take-over did not end:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}

// takeOver plays passes until the take-over has ended and a pass writes nothing but
// the stable services' Ensure, checking at every state that the graph serves (a ready
// frontend, 2 ready replicas per worker service), then that nothing of Dynamo's is left
// and its frontend Service was adopted. It returns the transcript, passes separated by
// "--", and the final status.
func (h *handover) takeOver(t *testing.T) []string {
	t.Helper()
	var got []string
	for range 30 {
		said := h.pass(t)
		h.serving(t, 2)
		got = append(append(got, said...), "--")
		if h.dy == nil && len(said) == 1 && isStableEnsure(said[0]) {
			break
		}
	}
	if h.dy != nil {
		t.Fatalf("the take-over did not end: %+v\n%s", h.dy, strings.Join(got, "\n"))
	}
	for _, w := range h.workloads {
		if w.Backend == decide.DynamoBackend || w.Hash == dynamoHash {
			t.Errorf("Dynamo's workload %s is left", w.Name)
		}
	}
	if !slices.ContainsFunc(h.objects.Services, func(s corev1.Service) bool {
		return s.Name == "g-frontend" && metav1.IsControlledBy(&s, h.dgd) && s.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue
	}) {
		t.Errorf("Dynamo's frontend Service was not adopted: %v", h.objects.Services)
	}
	return append(got, summary(h.dgd.Status))
}

// TestDecideDynamoActive: while Dynamo's operator may still act on the graph (no Lease,
// not paused and released), the pass writes nothing and stops with
// ReasonDynamoOperatorActive, asking to look again.
func TestDecideDynamoActive(t *testing.T) {
	h := newHandover(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Obj(), "")
	d := decide.Decide(h.snapshot())
	if len(d.Writes) != 0 {
		t.Errorf("writes %v, want none", d.Writes)
	}
	if got := condition(*d.Status, v1alpha1.ConditionReady); got != "False/"+v1alpha1.ReasonDynamoOperatorActive {
		t.Errorf("Ready %s, want False/%s", got, v1alpha1.ReasonDynamoOperatorActive)
	}
	if d.Requeue == 0 || d.Requeue > decide.DynamoRecheck {
		t.Errorf("requeue %s, want within %s", d.Requeue, decide.DynamoRecheck)
	}
}

// TestDecideDynamoUnsupported: a graph Dynamo's operator runs on its Grove pathway (its
// PodCliqueSet of the DGD) is not taken over, Lease held or not: the pass writes nothing
// (nothing beside Dynamo's PodCliqueSet, which would stay routed to for good) and stops
// with ReasonDynamoTakeOverUnsupported, naming it.
func TestDecideDynamoUnsupported(t *testing.T) {
	for _, stopped := range []string{"", "Lease dynamo-operator-namespace-scope held"} {
		w := newWorld(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Obj())
		w.dgd.Finalizers = []string{decide.DynamoFinalizer}
		s := w.snapshot()
		s.Dynamo = &decide.Dynamo{Stopped: stopped, Finalizer: true, Unsupported: []backends.ObjectRef{{Kind: "PodCliqueSet", Name: "g", UID: "uid-g"}}}
		d := decide.Decide(s)
		if len(d.Writes) != 0 {
			t.Errorf("stopped %q: writes %v, want none", stopped, d.Writes)
		}
		if got := condition(*d.Status, v1alpha1.ConditionReady); got != "False/"+v1alpha1.ReasonDynamoTakeOverUnsupported {
			t.Errorf("stopped %q: Ready %s, want False/%s", stopped, got, v1alpha1.ReasonDynamoTakeOverUnsupported)
		}
		if c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "PodCliqueSet g") {
			t.Errorf("stopped %q: Ready %+v does not name Dynamo's PodCliqueSet", stopped, c)
		}
		if d.Requeue == 0 || d.Requeue > decide.DynamoRecheck {
			t.Errorf("requeue %s, want within %s", d.Requeue, decide.DynamoRecheck)
		}
	}
}

// newHandoverOnGrove is newHandover for a graph Dynamo's operator ran on Grove: one
// PodCliqueSet `g` (controlled by the DGD) whose worker components are workloads of
// decide.DynamoBackend grouped under it (a standalone PodClique `g-0-<component>`, or
// for a multinode one a PodCliqueScalingGroup of gangs), their cliques hashless (the
// legacy revision), each with the floor Dynamo's minAvailable 1 gives it; its frontend
// clique is no workload. Dynamo's component Services `g-<component>` are the DGD's
// (dgd_grove_stable_resources_reconciler.go); no DCD exists on this pathway. Ours run
// on our Grove backend.
func newHandoverOnGrove(dgd *v1alpha1.DynamoGraphDeployment, stopped string) *handover {
	h := &handover{world: newWorld(dgd)}
	h.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendGrove: groveBackend}
	// Dynamo's PodCliqueSet holds `g`: ours take the next free names.
	h.groups = map[backends.Key]string{{Service: "Frontend"}: "g-1"}
	dgd.Finalizers = []string{decide.DynamoFinalizer}
	svc := func(name string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{v1alpha1.LabelGraph: dgd.Name}}}
	}
	h.dy = &decide.Dynamo{Stopped: stopped, Finalizer: true, Floors: map[string]int32{},
		Services: []corev1.Service{svc("g-decode"), svc("g-frontend"), svc("g-prefill")}}
	for _, s := range []string{"decode", "prefill"} {
		name, kind := "g-0-"+s, "PodClique"
		if dgd.Spec.Services[s].IsMultinode() {
			kind = "PodCliqueScalingGroup"
		}
		h.dy.Floors[name] = 1
		h.workloads[name] = &decide.Workload{Backend: decide.DynamoBackend, Pods: 2, Workload: backends.Workload{
			Key: backends.Key{Service: s, Hash: "legacy"}, Kind: kind, Name: name, UID: types.UID("uid-" + name),
			Group:    &backends.ObjectRef{Kind: "PodCliqueSet", Name: "g", UID: "uid-g"},
			Replicas: 2, Ready: 2, Updated: 2, Current: 2, Synced: true}}
	}
	return h
}

// dynamoPCSLive reports whether Dynamo's PodCliqueSet still runs (any component of it).
func (h *handover) dynamoPCSLive() bool {
	for _, w := range h.workloads {
		if w.Backend == decide.DynamoBackend && w.Group != nil {
			return true
		}
	}
	return false
}

// servingOnGrove checks a state of a Grove take-over: a ready frontend (Dynamo's clique
// while its PodCliqueSet runs, or ours) and at least floor ready replicas (gangs) per
// worker service over Dynamo's components and ours.
func (h *handover) servingOnGrove(t *testing.T, floor int32) {
	t.Helper()
	frontends := int32(0)
	if h.dynamoPCSLive() {
		frontends++
	}
	ready := map[string]int32{}
	for _, w := range h.workloads {
		if w.Hash == "" && w.Service == "Frontend" {
			frontends += w.Ready
		} else if w.Hash != "" && !w.Terminating {
			ready[w.Service] += min(w.Ready, w.Replicas)
		}
	}
	if frontends == 0 {
		t.Errorf("no ready frontend")
	}
	for _, s := range []string{"decode", "prefill"} {
		if ready[s] < floor {
			t.Errorf("%s: %d ready, want at least %d", s, ready[s], floor)
		}
	}
}

// takeOverOnGrove plays a Grove take-over to its end, checking every state
// (servingOnGrove), that no component of Dynamo's is scaled below its floor, and that
// Dynamo's PodCliqueSet is deleted only by a pass that saw every component of ours
// ready (the spec's replicas of the goal revision, a ready frontend of ours).
func (h *handover) takeOverOnGrove(t *testing.T, slowFrontend int) []string {
	t.Helper()
	var got []string
	for i := range 30 {
		s := h.snapshot()
		oursReady := map[string]int32{}
		for _, w := range s.Workloads {
			if w.Backend != decide.DynamoBackend && !w.Terminating {
				oursReady[w.Service] += min(w.Ready, w.Replicas)
			}
		}
		said := h.pass(t)
		if i < slowFrontend {
			for _, w := range h.workloads {
				if w.Backend != decide.DynamoBackend && w.Service == "Frontend" {
					w.Ready = 0 // our frontend's pod is not ready yet
				}
			}
		}
		for _, l := range said {
			if strings.HasPrefix(l, "Scale Dynamo ") && strings.Contains(l, "->0") {
				t.Errorf("a component of Dynamo's scaled below its floor: %s", l)
			}
			if strings.HasPrefix(l, "DeleteWorkload Dynamo ") && (oursReady["Frontend"] < 1 || oursReady["decode"] < 2 || oursReady["prefill"] < 2) {
				t.Errorf("Dynamo's PodCliqueSet deleted while ours had %v ready: %s", oursReady, l)
			}
		}
		h.servingOnGrove(t, 2)
		got = append(append(got, said...), "--")
		if h.dy == nil && len(said) == 1 && isStableEnsure(said[0]) {
			break
		}
	}
	if h.dy != nil || h.dynamoPCSLive() {
		t.Fatalf("the take-over did not end: %+v\n%s", h.dy, strings.Join(got, "\n"))
	}
	return append(got, summary(h.dgd.Status))
}

// TestDecideDynamoHandoverGrove plays the take-over of a graph Dynamo's operator ran
// on Grove (its Lease held), single-node workers (standalone cliques) and multinode
// ones (scaling groups of gangs of 2): ours roll out in our own PodCliqueSets beside
// Dynamo's under maxSurge 1 / maxUnavailable 0 (every worker service keeps 2 ready
// replicas or gangs at every state), decode grown first; a component of Dynamo's is
// scaled down to its floor (minAvailable 1), never to zero; Dynamo's PodCliqueSet is
// deleted whole once every component of ours is ready (its frontend clique serves
// until then: with our frontend unready for 4 passes, Dynamo's workers wait at their
// floor and its PodCliqueSet stays); its Services go and its finalizer leaves the DGD.
// Transcripts: testdata/dynamo-handover-grove{,-gangs,-slow-frontend}.golden.
func TestDecideDynamoHandoverGrove(t *testing.T) {
	for _, c := range []struct {
		name string
		dgd  *harness.DGD
		slow int // passes our frontend stays unready
	}{
		{"dynamo-handover-grove", harness.NewDGD("ns", "g").Disagg(2, 2, "img:1"), 0},
		{"dynamo-handover-grove-gangs", harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Multinode("prefill", 2).Multinode("decode", 2), 0},
		{"dynamo-handover-grove-slow-frontend", harness.NewDGD("ns", "g").Disagg(2, 2, "img:1"), 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHandoverOnGrove(c.dgd.Rollout("1", "0").Backend(v1alpha1.BackendGrove).Obj(), "Lease dynamo-operator-namespace-scope held")
			got := h.takeOverOnGrove(t, c.slow)
			for _, want := range []string{"Scale Dynamo g-0-prefill 2->1", "Scale Dynamo g-0-decode 2->1", "DeleteWorkload Dynamo g-0-", "ReleaseDynamo"} {
				if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, want) }) {
					t.Errorf("no %q in the transcript", want)
				}
			}
			golden(t, c.name, got)
		})
	}
}

// TestDecideDynamoGroveBlocked: a Grove take-over the floor would deadlock is held
// before any write (DynamoTakeOverUnsupported, naming why): maxSurge 0 (the planner
// would drain Dynamo's replica before growing ours, and it cannot go below its
// minAvailable) and Recreate (Dynamo's workers to zero inside the PodCliqueSet that
// runs its frontend).
func TestDecideDynamoGroveBlocked(t *testing.T) {
	for name, c := range map[string]struct {
		dgd  *v1alpha1.DynamoGraphDeployment
		want string
	}{
		"maxSurge 0": {harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("0", "1").Backend(v1alpha1.BackendGrove).Obj(), "maxSurge resolves to 0"},
		"Recreate":   {harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Strategy(v1alpha1.RecreateStrategy).Backend(v1alpha1.BackendGrove).Obj(), "Recreate"},
	} {
		h := newHandoverOnGrove(c.dgd, "Lease dynamo-operator-namespace-scope held")
		d := decide.Decide(h.snapshot())
		if len(d.Writes) != 0 {
			t.Errorf("%s: writes %v, want none", name, d.Writes)
		}
		ready := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Reason != v1alpha1.ReasonDynamoTakeOverUnsupported || !strings.Contains(ready.Message, "g-0-") || !strings.Contains(ready.Message, c.want) {
			t.Errorf("%s: Ready %+v, want %s naming Dynamo's clique and saying %q", name, ready, v1alpha1.ReasonDynamoTakeOverUnsupported, c.want)
		}
	}
}
