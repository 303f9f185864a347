package controllers

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/controllers/steps"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
)

// pass is the state of one reconcile of one DGD. Everything it decides from is read from
// the API (workloads, pods, ControllerRevisions, the DGD status), so a restarted operator
// continues where the last one stopped; the in-memory expectations only make a pass wait
// for the cache to show the previous pass's writes.
type pass struct {
	r   *Reconciler
	dgd *v1alpha1.DynamoGraphDeployment
	old *v1alpha1.DynamoGraphDeploymentStatus
	now time.Time

	backendOf map[string]backends.Backend // service -> backend
	workloads []observed
	pods      []podMeta // the DGD's pods (countPods)
	disc      discovery // what Dynamo's discovery shows of them (observeDiscovery)
	revs      revisions.Result
	revNumber map[string]int64 // worker hash -> ControllerRevision number
	plan      planner.Plan
	wrote     []string // human-readable workload writes made this pass, for events and progress
	// objects are writes of the objects the workloads' pods need (Services, RBAC,
	// ConfigMaps, Secrets): an event of their own, never rollout progress.
	objects []string
	events  []pendingEvent // emitted at the end of the pass (emitEvents)
	// unschedulable: per service, its pods the scheduler cannot place (findUnschedulable).
	unschedulable map[string]string
	invalid       *invalidSpecError
	// conflicts are the objects the DGD needs that exist under their names but are
	// someone else's (backends.NameConflictError), each one's message.
	conflicts    []string
	requeueAfter time.Duration // the soonest pass any part of this one asked for (requeueIn)
	// waitingForCache: the cache does not yet show the operator's last write; this pass
	// acts on nothing and writes no status.
	waitingForCache bool
	created         []observed      // workloads this pass created
	deleted         map[string]bool // objects this pass deleted (groupOf)
	result          []observed      // the workloads as this pass leaves them (computeResult)
	after           planner.Plan    // the planner's view of result: the phase the status reports
	// hold is the step machine's decision with spec.rollout.steps (runSteps), nil without.
	hold *steps.Output
	// analyses are status.rollingUpdate.analyses as runSteps leaves them.
	analyses []v1alpha1.AnalysisStatus
	// attempt, abort and retried: the try of this rollout, why it was aborted (nil: it
	// was not), and whether this pass retried it (resolveAbort, startAbort).
	attempt int32
	abort   *v1alpha1.AbortStatus
	retried bool
	// goal is the revision this pass moves the workers to: the update revision, or the
	// stable one once aborted; goalDGD is the DGD its worker services render from
	// (setGoal).
	goal    *appsv1.ControllerRevision
	goalDGD *v1alpha1.DynamoGraphDeployment
}

// observed is a workload with the backend that manages it and its live pod count.
type observed struct {
	backends.Workload
	backend backends.Backend
	pods    int32 // replicas with pods still present (terminating ones included)
}

// validBudget matches a maxSurge / maxUnavailable annotation value: "2" or "25%".
var validBudget = regexp.MustCompile(`^[0-9]+%?$`)

// invalidSpecError is a problem with the DGD spec that no retry can fix.
type invalidSpecError struct{ msg string }

func (e *invalidSpecError) Error() string { return e.msg }

func (p *pass) sync(ctx context.Context) error {
	if err := p.resolveBackends(); err != nil {
		return err
	}
	if err := p.observe(ctx); err != nil {
		return err
	}
	if stale := p.staleWorkload(); stale != "" {
		// Act on nothing until the cache shows our last write; its watch event requeues.
		log.FromContext(ctx).V(1).Info("waiting for the cache to show the last write", "workload", stale)
		p.waitingForCache = true
		return nil
	}
	res, err := revisions.Sync(ctx, p.r.History, p.dgd, p.hashesInUse())
	if err != nil {
		return fmt.Errorf("syncing revisions: %w", err)
	}
	p.revs = res
	ObserveRevisionsKept(p.dgd.Namespace, p.dgd.Name, len(res.Revisions))
	p.revNumber = map[string]int64{}
	for _, rev := range res.Revisions {
		p.revNumber[revisions.HashOf(rev)] = rev.Revision
	}
	if err := p.syncPlatform(ctx); err != nil {
		return err
	}
	if err := p.syncStable(ctx); err != nil {
		return err
	}
	p.resolveAbort()
	if err := p.runSteps(ctx); err != nil { // an aborted rollout runs none; a failed analysis aborts it
		return err
	}
	if err := p.setGoal(); err != nil {
		return err
	}
	if err := p.rollout(ctx); err != nil {
		return err
	}
	if err := p.cleanup(ctx); err != nil {
		return err
	}
	p.computeResult()
	return p.syncServices(ctx)
}

// requeueIn asks for a pass within d: the pass ends with the soonest of its requests.
func (p *pass) requeueIn(d time.Duration) {
	if d > 0 && (p.requeueAfter == 0 || d < p.requeueAfter) {
		p.requeueAfter = d
	}
}

// computeResult is the state this pass leaves behind, which the status reports: every
// workload at the replicas the pass set, ready counted up to those replicas (a replica
// being removed is not counted on), workloads it created, none it deleted. Reporting
// the result rather than the input means the passes that only see their own writes
// arrive in the cache find nothing new to write: one status write per step.
func (p *pass) computeResult() {
	p.result = nil
	for _, w := range p.workloads {
		switch {
		case p.deleted[groupOf(w)] || w.Terminating:
			// Going: no replicas, but its pods still count until they are gone.
			w.Terminating, w.Replicas, w.Ready = true, 0, 0
		case w.Hash != "":
			w.Replicas = p.target(w.Key, w.Replicas)
			w.Ready = min(w.Ready, w.Replicas)
		}
		p.result = append(p.result, w)
	}
	p.result = append(p.result, p.created...)
	p.after = planner.Compute(p.inputFrom(p.result))
}

// resolveBackends picks every service's backend and renders every service, in every
// role it has, once, so that a bad spec is reported before anything is written.
func (p *pass) resolveBackends() error {
	p.backendOf = map[string]backends.Backend{}
	for _, name := range p.dgd.ServiceNames() {
		svc := p.dgd.Spec.Services[name]
		b, err := p.r.Backends.For(p.dgd, svc)
		if err != nil {
			return &invalidSpecError{msg: fmt.Sprintf("spec.services[%s]: %v", name, err)}
		}
		for _, a := range []string{v1alpha1.AnnotationMaxSurge, v1alpha1.AnnotationMaxUnavailable} {
			if v, ok := svc.Annotations[a]; ok && !validBudget.MatchString(v) {
				return &invalidSpecError{msg: fmt.Sprintf("spec.services[%s].annotations[%s]: %q is not a non-negative integer or percentage", name, a, v)}
			}
		}
		p.backendOf[name] = b
	}
	if err := render.Validate(p.dgd, p.r.Platform); err != nil {
		return &invalidSpecError{msg: err.Error()}
	}
	for _, b := range p.r.Backends.All() {
		if v, ok := b.(backends.SpecValidator); ok {
			if err := v.ValidateSpec(p.dgd, p.servicesOn(b)); err != nil {
				return &invalidSpecError{msg: err.Error()}
			}
		}
	}
	return nil
}

// servicesOn lists the services that run on backend b.
func (p *pass) servicesOn(b backends.Backend) []string {
	var out []string
	for _, name := range p.dgd.ServiceNames() {
		if p.backendOf[name] == b {
			out = append(out, name)
		}
	}
	return out
}

// observe lists the DGD's workloads on every registered backend and counts their pods.
func (p *pass) observe(ctx context.Context) error {
	pods, err := p.countPods(ctx)
	if err != nil {
		return err
	}
	p.workloads = nil
	seen := map[backends.Key]bool{}
	for _, b := range p.r.Backends.All() {
		ws, err := b.Observe(ctx, p.dgd)
		if err != nil {
			return err
		}
		for _, w := range ws {
			n := pods[w.Key]
			if seen[w.Key] {
				n = 0 // an outdated stable workload's pods are counted once, with the first
			}
			seen[w.Key] = true
			p.workloads = append(p.workloads, observed{Workload: w, backend: b, pods: n})
		}
	}
	p.workloads = append(p.workloads, p.podsWithoutWorkload(pods, seen)...)
	sort.Slice(p.workloads, func(i, j int) bool { return p.workloads[i].Name < p.workloads[j].Name })
	return p.observeDiscovery(ctx)
}

// podsWithoutWorkload stands in for worker workloads that are gone while their pods
// are still terminating (a Grove revision's PodCliqueSet is deleted whole and its
// objects vanish before its pods do): terminating, no replicas, their pods counted, so
// Recreate still waits for them and the revision stays in use.
func (p *pass) podsWithoutWorkload(pods map[backends.Key]int32, seen map[backends.Key]bool) []observed {
	var out []observed
	for k, n := range pods {
		if k.Hash == "" || seen[k] || n == 0 {
			continue
		}
		out = append(out, observed{pods: n, backend: p.backendOf[k.Service], Workload: backends.Workload{
			Key: k, Kind: "Pod", Name: fmt.Sprintf("pods of %s at %s", k.Service, k.Hash), Terminating: true, Synced: true}})
	}
	return out
}

// countPods counts, per workload, the replicas that still have pods (a gang counts while
// any of its pods is left). Deployment status excludes terminating pods; Recreate must
// wait for them too.
func (p *pass) countPods(ctx context.Context) (map[backends.Key]int32, error) {
	var pods metav1.PartialObjectMetadataList
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := backends.ListGraph(ctx, p.r.Client, &pods, p.dgd.Namespace, p.dgd.Name); err != nil {
		return nil, fmt.Errorf("listing pods of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	p.pods = pods.Items
	n := map[backends.Key]int32{}
	for i := range pods.Items {
		l := pods.Items[i].Labels
		n[backends.Key{Service: l[v1alpha1.LabelService], Hash: l[v1alpha1.LabelWorkerHash]}]++
	}
	for k, v := range n {
		if svc := p.dgd.Spec.Services[k.Service]; svc != nil && svc.NodeCount() > 1 {
			n[k] = (v + svc.NodeCount() - 1) / svc.NodeCount()
		}
	}
	return n, nil
}

// staleWorkload names a workload whose cached replicas differ from the operator's last
// write, or whose status has not caught up with its spec (expectations.fresh), or
// returns "".
// Every workload is looked at, so that the freshness waits of workloads created
// together start together. A status that reports nothing ready and no replica cannot
// overstate readiness (a workload just created): it needs no wait.
func (p *pass) staleWorkload() string {
	stale := ""
	for _, w := range p.workloads {
		if w.Terminating {
			continue
		}
		key := p.key(w.Name)
		synced := w.Synced || w.Ready == 0 && w.Current == 0
		if !p.r.expected.satisfied(key, w.Replicas) || !p.r.expected.fresh(key, w.Generation, synced) {
			if stale == "" {
				stale = w.Name
			}
		}
	}
	return stale
}

func (p *pass) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: p.dgd.Namespace, Name: name}
}

func (p *pass) hashesInUse() sets.Set[string] {
	in := sets.New[string]()
	for _, w := range p.workloads {
		if w.Hash != "" {
			in.Insert(w.Hash)
		}
	}
	return in
}

// syncStable creates or updates in place every non-worker service (frontend, planner,
// anything else) and deletes stable workloads of services that are gone. On a
// SideBySideStable backend a new template is a new workload beside the old one; the
// old one goes once the new one has the availability a Deployment's default rolling
// update keeps (replacedBy).
func (p *pass) syncStable(ctx context.Context) error {
	pools := map[backends.Backend]*backends.Pool{}
	var order []backends.Backend
	for _, name := range p.dgd.ServiceNames() {
		svc := p.dgd.Spec.Services[name]
		if svc.IsWorker() {
			continue
		}
		b := p.backendOf[name]
		if pools[b] == nil {
			pools[b] = &backends.Pool{}
			order = append(order, b)
		}
		key := backends.Key{Service: name}
		pools[b].Services = append(pools[b].Services, backends.ServiceWorkload{Key: key, Spec: svc, Replicas: svc.DesiredReplicas()})
		if wname := b.Name(p.dgd, key); !p.observedNamed(wname) {
			p.wrote = append(p.wrote, fmt.Sprintf("created %s for %s", wname, name))
		}
	}
	for _, b := range order {
		if err := b.Ensure(ctx, p.dgd, *pools[b]); err != nil {
			return err
		}
	}
	return p.retireStable(ctx)
}

// retireStable deletes stable workloads whose service is gone (or is a worker now, or
// moved backend) and outdated ones whose replacement is ready. A workload in a group
// goes only with its whole group, once every workload in it may go.
func (p *pass) retireStable(ctx context.Context) error {
	mayGo := map[string]bool{} // group (or workload) name -> every member may go
	why := map[string]string{}
	var order []observed
	for _, w := range p.workloads {
		if w.Hash != "" || w.Terminating {
			continue
		}
		id := groupOf(w)
		ok, reason := p.stableMayGo(w)
		if _, seen := mayGo[id]; !seen {
			mayGo[id] = true
			order = append(order, w)
		}
		mayGo[id] = mayGo[id] && ok
		if ok && why[id] == "" {
			why[id] = reason
		}
	}
	for _, w := range order {
		if id := groupOf(w); mayGo[id] {
			if err := p.delete(ctx, w, why[id]); err != nil {
				return err
			}
		}
	}
	return nil
}

// stableMayGo reports whether a stable workload may be deleted, and why.
func (p *pass) stableMayGo(w observed) (bool, string) {
	svc := p.dgd.Spec.Services[w.Service]
	switch {
	case svc == nil:
		return true, fmt.Sprintf("service %s is gone", w.Service)
	case svc.IsWorker():
		return true, fmt.Sprintf("service %s is a worker now", w.Service)
	case p.backendOf[w.Service] != w.backend:
		return true, fmt.Sprintf("service %s moved to %s", w.Service, p.backendOf[w.Service].Kind())
	case !w.Outdated:
		return false, ""
	}
	return p.replacedBy(w.Service, svc.DesiredReplicas())
}

// replacedBy reports whether a stable service's outdated workloads may go: its current
// workload has at least R - ⌊R/4⌋ ready replicas (a Deployment's default maxUnavailable
// of 25%, so a one-replica frontend never has none), or the outdated ones have none
// ready (deleting them loses nothing).
func (p *pass) replacedBy(service string, r int32) (bool, string) {
	var ready, old int32
	for _, w := range p.workloads {
		if w.Service != service || w.Hash != "" || w.Terminating {
			continue
		}
		if w.Outdated {
			old += min(w.Ready, w.Replicas)
		} else {
			ready += min(w.Ready, w.Replicas)
		}
	}
	floor := r - r/4
	switch {
	case ready >= floor:
		return true, fmt.Sprintf("%s has %d/%d ready on its new template", service, ready, r)
	case old == 0:
		return true, fmt.Sprintf("%s had none ready on its old template", service)
	}
	return false, ""
}

// observedNamed reports whether a workload of that name was observed.
func (p *pass) observedNamed(name string) bool {
	for _, w := range p.workloads {
		if w.Name == name {
			return true
		}
	}
	return false
}

// groupOf names the object deleting w removes: its group, or w itself.
func groupOf(w observed) string {
	if w.Group != nil {
		return w.Group.String()
	}
	return w.Kind + " " + w.Name
}

// cleanup deletes the workloads of old revisions once their whole pool is drained: every
// workload at zero replicas, reporting none, and no pod left (terminating ones
// included: a workload's own status stops counting a pod as soon as it terminates).
func (p *pass) cleanup(ctx context.Context) error {
	update := p.goalHash()
	drained := map[string]bool{}
	for _, w := range p.workloads {
		if w.Hash == "" || w.Hash == update {
			continue
		}
		if _, seen := drained[w.Hash]; !seen {
			drained[w.Hash] = true
		}
		if p.target(w.Key, w.Replicas) > 0 || w.pods > 0 || w.Current > 0 {
			drained[w.Hash] = false
		}
	}
	for _, w := range p.workloads {
		if w.Hash != "" && drained[w.Hash] && !w.Terminating {
			if err := p.delete(ctx, w, fmt.Sprintf("revision %d is drained", p.revisionOf(w.Hash))); err != nil {
				return err
			}
		}
	}
	return nil
}

// delete deletes the object holding w (its group, once) and says why in the step's
// event.
func (p *pass) delete(ctx context.Context, w observed, why string) error {
	id := groupOf(w)
	if p.deleted[id] {
		return nil
	}
	if err := w.backend.Delete(ctx, p.dgd, w.Workload); err != nil {
		return err
	}
	if p.deleted == nil {
		p.deleted = map[string]bool{}
	}
	p.deleted[id] = true
	for _, o := range p.workloads {
		if groupOf(o) == id {
			p.r.expected.forget(p.key(o.Name))
		}
	}
	p.wrote = append(p.wrote, fmt.Sprintf("deleted %s (%s)", id, why))
	return nil
}

func (p *pass) updateHash() string { return revisions.HashOf(p.revs.Update) }
