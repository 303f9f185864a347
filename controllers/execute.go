package controllers

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
)

// execute makes a decision's writes in order and says what they made. The first write
// that fails ends it: the writes after it are not made, and the outcome says why (a
// name or spec the DGD cannot go on with, a hash collision, a write the API server
// refused, or an error), which the status reports (decide.Decision.Conclude).
func (r *Reconciler) execute(ctx context.Context, s *decide.Snapshot, d decide.Decision) decide.Outcome {
	var out decide.Outcome
	for _, w := range d.Writes {
		made, err := r.write(ctx, s.DGD, w, &out)
		var taken *backends.NameConflictError
		var spec *backends.SpecError
		switch {
		case errors.As(err, &taken) || errors.As(err, &spec):
			out.Stopped = err
		case refused(err):
			out.Refused = err
		case err != nil:
			out.Err = err
		}
		if err != nil || out.Collided != nil {
			return out
		}
		out.Made++
		if made && w.Progress {
			out.Progress = append(out.Progress, w.Say...)
		} else if made {
			out.Objects = append(out.Objects, w.Say...)
		}
	}
	return out
}

// write makes one write and reports whether it made what it says (a create that found
// its object there made nothing).
func (r *Reconciler) write(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w decide.Write, out *decide.Outcome) (bool, error) {
	switch w.Op {
	case decide.CreateRevision, decide.RenumberRevision, decide.SetChangeCause, decide.DeleteRevision:
		return true, r.writeRevision(ctx, dgd, w, out)
	case decide.CreateObject:
		return r.createObject(ctx, dgd, w, out)
	case decide.UpdateObject:
		if err := r.Client.Update(ctx, w.Object.DeepCopyObject().(client.Object)); err != nil {
			return false, fmt.Errorf("updating %s %s/%s: %w", w.Kind, w.Object.GetNamespace(), w.Object.GetName(), err)
		}
		return true, nil
	case decide.DeleteObject:
		policy := metav1.DeletePropagationBackground
		if w.Orphan {
			policy = metav1.DeletePropagationOrphan
		}
		return true, backends.DeleteObjectWith(ctx, r.Client, w.Object.DeepCopyObject().(client.Object), w.Kind, policy)
	case decide.ReleaseDynamo:
		return true, r.releaseDynamo(ctx, dgd, w.Names)
	case decide.CreateSSHKey:
		return true, r.createSSHKey(ctx, w)
	case decide.AnnounceStatus:
		return true, r.announce(ctx, dgd, w.Status)
	}
	return true, r.writeWorkload(ctx, dgd, w)
}

// writeWorkload makes a backend's write, with the expectations it sets and ends.
func (r *Reconciler) writeWorkload(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w decide.Write) error {
	if w.Backend == decide.DynamoBackend {
		return r.writeDynamo(ctx, dgd, w)
	}
	b := r.Backends.ByKind(w.Backend)
	if b == nil {
		return fmt.Errorf("no backend manages %s", w.Backend)
	}
	key := func(name string) types.NamespacedName {
		return types.NamespacedName{Namespace: dgd.Namespace, Name: name}
	}
	for name, n := range w.Expect {
		r.expected.expect(key(name), n)
	}
	var err error
	switch w.Op {
	case decide.Relabel:
		err = b.Relabel(ctx, dgd, w.Workload)
	case decide.Ensure:
		err = b.Ensure(ctx, w.From, w.Pool)
	case decide.Scale:
		if err = b.Scale(ctx, dgd, w.Workload, w.Replicas); err != nil {
			r.expected.forget(key(w.Workload.Name))
		}
	case decide.DeleteWorkload:
		err = b.Delete(ctx, dgd, w.Workload)
	case decide.ReleaseSubdomain:
		if rel, ok := b.(backends.SubdomainReleaser); ok {
			err = rel.ReleaseSubdomain(ctx, dgd, w.Name)
		}
	}
	if err == nil {
		for _, name := range w.Forget {
			r.expected.forget(key(name))
		}
	}
	return err
}

// writeRevision makes a write of the DGD's history. A create that met a hash collision
// the list did not show (the revision stored under another name) ends the pass.
func (r *Reconciler) writeRevision(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w decide.Write, out *decide.Outcome) error {
	var err error
	switch w.Op {
	case decide.CreateRevision:
		cc := w.Collisions
		var created *appsv1.ControllerRevision
		if created, err = r.History.Create(revisions.WithWorkerHash(ctx, revisions.HashOf(w.Revision)), dgd, w.Revision, &cc); err == nil && created.Name != w.Revision.Name {
			out.Collided = &cc
		}
	case decide.RenumberRevision:
		_, err = r.History.Renumber(ctx, w.Revision, w.Number)
	case decide.SetChangeCause:
		_, err = r.History.SetChangeCause(ctx, w.Revision, w.Cause)
	case decide.DeleteRevision:
		err = r.History.Delete(ctx, w.Revision)
	}
	return err
}

// createObject creates an object the DGD's pods need. One that exists already (the
// cache did not show it) made nothing: the DGD's own is fine (an earlier pass's create
// the cache does not show yet), as is any the DGD is only one of the owners of (the next
// pass adds it); someone else's the DGD would control is a name conflict, reported and
// left alone (issue 22: LWS's headless Service taken as our discovery Service).
func (r *Reconciler) createObject(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w decide.Write, out *decide.Outcome) (bool, error) {
	obj := w.Object.DeepCopyObject().(client.Object)
	err := r.Client.Create(ctx, obj)
	switch {
	case err == nil:
		return true, nil
	case !apierrors.IsAlreadyExists(err):
		return false, fmt.Errorf("creating %s %s/%s: %w", w.Kind, obj.GetNamespace(), obj.GetName(), err)
	case r.APIReader == nil:
		return false, fmt.Errorf("creating %s %s/%s: it exists, and the cache does not show it yet", w.Kind, obj.GetNamespace(), obj.GetName())
	}
	have := w.Object.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), have); err != nil {
		return false, fmt.Errorf("creating %s %s/%s: it exists, but reading it: %w", w.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if w.Controller && !metav1.IsControlledBy(have, dgd) {
		out.Conflicts = append(out.Conflicts, backends.NotControlled(w.Kind, have, dgd))
		return false, nil
	}
	// The DGD's own without our labels (Dynamo's operator made the discovery RBAC under
	// the same names, controlled by the DGD): labelled, so the cache shows it and the
	// next pass updates it in place rather than creating it again.
	if metav1.IsControlledBy(have, dgd) {
		return false, backends.PatchLabels(ctx, r.Client, have, backends.MissingLabels(have.GetLabels(), obj.GetLabels()))
	}
	return false, nil
}

// announce writes st as dgd's status ahead of the pass's own (decide.AnnounceStatus).
// dgd (the snapshot's, which the pass reports over) follows the write: its status and
// resource version are the API server's now, so the pass's status write that comes
// after is made over this one, not refused as a conflict, and stored as report does
// (statusRV), so the next pass does not read a cache behind it.
func (r *Reconciler) announce(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, st *v1alpha1.DynamoGraphDeploymentStatus) error {
	wrote := dgd.DeepCopy()
	wrote.Status = *st.DeepCopy()
	if err := r.updateStatus(ctx, wrote); err != nil {
		return err
	}
	dgd.ResourceVersion, dgd.Status = wrote.ResourceVersion, wrote.Status
	return nil
}

// createSSHKey makes the DGD's SSH key Secret for TRT-LLM gangs (its key is made now).
func (r *Reconciler) createSSHKey(ctx context.Context, w decide.Write) error {
	s, err := render.NewSSHKeySecret(w.Object.GetNamespace(), w.Object.GetName(), w.Object.GetLabels())
	if err != nil {
		return err
	}
	s.OwnerReferences = w.Object.GetOwnerReferences()
	if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	// Made, or there already (AlreadyExists is the answer: the operator reads no Secret).
	r.sshKeys.Store(client.ObjectKeyFromObject(s), true)
	return nil
}

// refused reports a write the API server refused for what it is (decide.Refusal).
func refused(err error) bool {
	reason, _ := decide.Refusal(err)
	return reason != ""
}
