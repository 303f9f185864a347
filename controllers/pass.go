package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// Reconcile brings one DGD a step closer to its spec, in the order the package doc
// gives: read the DGD, observe, decide (observing more when the decision asks), make
// the writes, report.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dgd, err := r.read(ctx, req)
	if dgd == nil || err != nil {
		return ctrl.Result{}, err
	}
	s, err := r.observe(ctx, dgd)
	if err != nil {
		return r.observeFailed(ctx, req, dgd, err)
	}
	d, err := r.decide(ctx, s)
	if err != nil {
		return r.result(ctx, req, decide.Report{}, err)
	}
	if d.Wait != "" {
		// Act on nothing until the cache shows our last write: the cache event that
		// satisfies the expectation requeues us; if someone else wrote the workload
		// meanwhile, the expectation expires instead.
		log.FromContext(ctx).V(1).Info("waiting for the cache to show the last write", "workload", d.Wait)
		return ctrl.Result{RequeueAfter: expectationTTL}, nil
	}
	// The measurements due are queried off the pass; the result's landing starts
	// another (measure.go).
	r.measurements().want(req.NamespacedName, dgd.UID, d.Measure)
	if l := log.FromContext(ctx).V(1); l.Enabled() {
		l.Info("executing", "writes", writeStrings(d.Writes))
	}
	out := r.execute(ctx, s, d)
	rep := d.Conclude(out)
	err = r.report(ctx, s, rep, out)
	if decide.NamespaceTerminating(out.Refused) {
		r.terminating.Store(req.Namespace, r.now())
	}
	return r.result(ctx, req, rep, errors.Join(d.Err, out.Err, rep.Retry, err))
}

// terminatingFor is how long a namespace whose deletion refused a write of the
// operator's is left alone: no pass acts on its DGDs meanwhile (they go with it; every
// create would be refused again), then one looks again.
const terminatingFor = 5 * time.Minute

// inTerminating reports whether ns refused a write of the operator's because it is being
// deleted, less than terminatingFor ago.
func (r *Reconciler) inTerminating(ns string) bool {
	v, ok := r.terminating.Load(ns)
	if !ok {
		return false
	}
	if r.now().Sub(v.(time.Time)) >= terminatingFor {
		r.terminating.Delete(ns)
		return false
	}
	return true
}

// observeFailed reports a read the pass could not make (a list its RBAC does not allow,
// a CRD removed) on the DGD, where a user looks first: Ready False, reason
// ObserveFailed, the message naming the resource, and a Warning Event when news; the
// pass is retried with backoff. A conflict or a cache not yet synced is no news.
func (r *Reconciler) observeFailed(ctx context.Context, req ctrl.Request, dgd *v1alpha1.DynamoGraphDeployment, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || !reportable(err) {
		return r.result(ctx, req, decide.Report{}, err)
	}
	st, ev := decide.HaltedStatus(dgd, r.now(), v1alpha1.ReasonObserveFailed, err.Error())
	s := &decide.Snapshot{DGD: dgd, Now: r.now()}
	rep := decide.Report{Status: st, Retry: err}
	if ev != nil {
		rep.Events = []decide.Event{*ev}
	}
	if werr := r.report(ctx, s, rep, decide.Outcome{}); werr != nil {
		return r.result(ctx, req, rep, errors.Join(err, werr))
	}
	return r.result(ctx, req, rep, err)
}

// reportable reports whether a failed read is one to show on the DGD: refused by the
// API server (forbidden, not found, no such kind), not a passing fault.
func reportable(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || apierrors.IsMethodNotSupported(err)
}

// writeStrings is each write's short form (decide.Write.String), for the debug log
// line a pass prints before its writes (the crash suite finds a pass's writes by it).
func writeStrings(ws []decide.Write) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

// read reads the DGD (nil when it is gone or being deleted: owner references
// garbage-collect every workload and revision), past the cache when the cache predates
// the operator's own last status write.
func (r *Reconciler) read(ctx context.Context, req ctrl.Request) (*v1alpha1.DynamoGraphDeployment, error) {
	var dgd v1alpha1.DynamoGraphDeployment
	if err := r.Client.Get(ctx, req.NamespacedName, &dgd); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req)
		}
		return nil, client.IgnoreNotFound(err)
	}
	if err := r.fresh(ctx, &dgd); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !dgd.DeletionTimestamp.IsZero() {
		r.forget(req)
		return nil, nil
	}
	if r.inTerminating(dgd.Namespace) {
		log.FromContext(ctx).V(1).Info("namespace being deleted: nothing to do")
		return nil, nil
	}
	return &dgd, nil
}

// forget drops what the operator keeps of a DGD that is gone: its metrics series, its
// last status write's version, its spec's checked verdict and its analysis measurements (in flight ones cancelled).
func (r *Reconciler) forget(req ctrl.Request) {
	ForgetDGD(req.Namespace, req.Name)
	r.statusRV.Delete(req.NamespacedName)
	r.measurements().forget(req.NamespacedName)
	r.specs.forget(req.NamespacedName)
}

// maxRounds bounds the rounds of observing more for one decision: each answers every
// need the decision before it had, and a decision asks for workload names and the
// unscheduled pods (analysis results are read before the first, never asked for).
const maxRounds = 40

// decide decides the pass from the snapshot, reading into it what the decision needs
// and deciding again until it needs nothing more.
func (r *Reconciler) decide(ctx context.Context, s *decide.Snapshot) (decide.Decision, error) {
	for range maxRounds {
		d := decide.Decide(s)
		if !d.Needs.Any() {
			if d.Metrics.RevisionsKept >= 0 {
				ObserveRevisionsKept(s.DGD.Namespace, s.DGD.Name, d.Metrics.RevisionsKept)
			}
			for _, m := range d.Measured {
				AnalysisMeasurements.WithLabelValues(s.DGD.Namespace, s.DGD.Name, string(m.Measurement.Phase)).Inc()
			}
			logMeasured(ctx, d)
			return d, nil
		}
		if err := r.observeMore(ctx, s, d.Needs); err != nil {
			return decide.Decision{}, err
		}
	}
	return decide.Decision{}, fmt.Errorf("deciding %s/%s: still needs more to observe after %d rounds", s.DGD.Namespace, s.DGD.Name, maxRounds)
}

// result is the pass's answer to the work queue: a conflict retries at once, an error
// with backoff (counted), else the soonest pass the report asked for.
//
// A refusal the status already shows (a forbidden write, a namespace being deleted, a
// read RBAC does not allow) is logged once, at info, not as an error with a stack trace
// on every retry: it is retried after the reconciler's own backoff (quietBackoff), and
// logged again only when its message changes.
func (r *Reconciler) result(ctx context.Context, req ctrl.Request, rep decide.Report, err error) (ctrl.Result, error) {
	if err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("conflict, requeueing", "error", err.Error())
			return ctrl.Result{Requeue: true}, nil
		}
		ObserveReconcileError(req.Namespace, req.Name)
		if shown(err) {
			return ctrl.Result{RequeueAfter: r.quiet.note(ctx, req.NamespacedName, err)}, nil
		}
		return ctrl.Result{}, err
	}
	r.quiet.clear(req.NamespacedName)
	return ctrl.Result{RequeueAfter: rep.Requeue}, nil
}

// shown reports whether err is one the pass has shown on the DGD (its status and a
// Warning Event): a write the API server refused, or a read it refused.
func shown(err error) bool {
	reason, _ := decide.Refusal(err)
	return reason != "" || reportable(err)
}

// fresh replaces a cached DGD that predates the operator's own last status write with
// the DGD that write's answer carried (or, when it is not kept, the API server's).
// Status writes start no pass, so a pass a workload event starts right after one can
// find the cache a write behind: its status write would conflict (a wasted pass and a
// rate-limited retry) and it would judge the step from a status it had already
// replaced (an Event said twice). The answer is what a read would have returned then,
// without a read on the step's path (19 ms under load in benchmark P2, before the
// scale writes); a write by someone else since reaches the cache and starts a pass as
// any would, and a status write on the older version conflicts and retries. The copy
// is dropped once the cache shows the write (settled). Resource versions compare as numbers
// (k8s.io/apimachinery/pkg/util/resourceversion, KEP-5504); one that does not parse
// keeps the cached DGD, and a conflict then retries as before.
func (r *Reconciler) fresh(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) error {
	key := client.ObjectKeyFromObject(dgd)
	v, ok := r.statusRV.Load(key)
	if !ok {
		return nil
	}
	w := v.(written)
	cmp, err := resourceversion.CompareResourceVersion(dgd.ResourceVersion, w.rv)
	switch {
	case err != nil:
		return nil
	case cmp >= 0:
		r.settled(dgd)
		return nil
	}
	StaleReads.Inc()
	if w.dgd != nil {
		w.dgd.DeepCopyInto(dgd)
		return nil
	}
	if r.APIReader == nil {
		return nil
	}
	return r.APIReader.Get(ctx, key, dgd)
}

// settled drops the answer kept of the operator's last status write of a DGD once o,
// the DGD as the cache shows it, is that write or newer: fresh no longer needs it, and
// a DGD that rests after its last status write (no pass follows one) keeps no copy.
// The cache's update event calls it (SetupWithManager), as does fresh.
func (r *Reconciler) settled(o client.Object) {
	key := client.ObjectKeyFromObject(o)
	v, ok := r.statusRV.Load(key)
	if !ok || v.(written).dgd == nil {
		return
	}
	if cmp, err := resourceversion.CompareResourceVersion(o.GetResourceVersion(), v.(written).rv); err == nil && cmp >= 0 {
		r.statusRV.CompareAndSwap(key, v, written{rv: v.(written).rv})
	}
}
