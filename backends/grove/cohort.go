package grove

import (
	"context"
	"fmt"
	"sort"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	renderpkg "github.com/dgd-rollout/operator/render"
)

// Cohort frontends (controllers/decide cohorts.go: a frontend service at one worker
// revision, key {frontend, hash}, discovering only that revision's Dynamo namespace).
// On Grove each lives in a PodCliqueSet of its own per (service, worker hash,
// template), one standalone clique of minAvailable 1, never inside its revision's worker
// PodCliqueSet, for three reasons:
//
//   - Grove's validating webhook rejects adding a clique to a live PodCliqueSet ("not
//     allowed to change clique composition": operator/internal/webhook/admission/pcs/
//     validation/podcliqueset.go validatePodCliqueUpdate, tag
//     operator/v0.1.0-alpha.12-rc1; FACTS.md). The prelude of cohorts gives the running
//     revision its own frontend while that revision's worker PodCliqueSet already runs.
//   - A frontend-only change must not touch the workers' PodCliqueSet: every template
//     write to it is a Grove rolling update candidate.
//   - Grove's RollingRecreate deletes a pod before it creates its replacement (a
//     1-replica frontend serves nothing for ~2.2 s: FACTS.md). So, as for a stable
//     service (StableSideBySide), a new frontend template is a new PodCliqueSet beside the
//     old one, which Observe then reports Outdated; the controller deletes the old one
//     once the new one has R - ⌊R/4⌋ ready (decide's retireStable).
//
// Such a PodCliqueSet is labelled like a stable one (the service and the template's
// stable hash) plus its revision's worker hash, and named by the first free name from
// `{dgd}-1` on (names.go). It is scaled through its PodClique's scale subresource, and
// deleted whole when its cohort drains (never scaled to 0, which arms Grove's gang
// termination: FACTS.md).

// cohortKeyID identifies the first PodCliqueSet of a cohort frontend key, whatever its
// template: the name Backend.Name gives a key nothing holds yet is the name Ensure
// creates it under, even when the two render different templates (the prelude makes
// the running revision's frontend from that revision's recorded template, while the
// spec already holds the next one).
func cohortKeyID(key backends.Key) string { return "cohort/" + key.Service + "/" + key.Hash }

// cohortID identifies a cohort frontend's PodCliqueSet by what it holds: the service at
// a worker revision, with one template.
func cohortID(key backends.Key, template string) string {
	return cohortKeyID(key) + "/" + template
}

// isCohortKey reports whether key is a cohort's frontend in dgd's spec: a non-worker
// service at a worker revision.
func isCohortKey(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) bool {
	svc := dgd.Spec.Services[key.Service]
	return key.Hash != "" && svc != nil && !svc.IsWorker()
}

// workerTypes are the component types (the clique label nvidia.com/dynamo-component-type)
// of worker services (v1alpha1 IsWorker).
var workerTypes = map[string]bool{v1alpha1.ComponentTypeWorker: true, v1alpha1.ComponentTypePrefill: true, v1alpha1.ComponentTypeDecode: true}

// cohortService is the service a cohort frontend's PodCliqueSet holds, read from its
// template as placements reads it (so a PodCliqueSet stripped of its labels is still
// told from its revision's workers): a worker hash, one standalone clique, and that
// clique no worker's.
func cohortService(pcs *grovev1.PodCliqueSet) (string, bool) {
	if workerHash(pcs) == "" {
		return "", false
	}
	places := placements(pcs)
	if len(places) != 1 {
		return "", false
	}
	for svc, pl := range places {
		for _, c := range pcs.Spec.Template.Cliques {
			if pl.Clique != "" && c.Name == pl.Clique {
				return svc, !workerTypes[c.Labels[v1alpha1.LabelComponentType]]
			}
		}
	}
	return "", false
}

// cohortTemplate is the stable hash of the template a cohort frontend's PodCliqueSet
// runs: its label, else (stripped) the hash of its template as stored, which is the
// template the operator wrote (its defaulted fields are set: clique) rendered for a
// single-node clique, whose pods do not depend on the PodCliqueSet's name.
func cohortTemplate(pcs *grovev1.PodCliqueSet) string {
	if h := pcs.Labels[LabelStableHash]; h != "" {
		return h
	}
	return stableHash(pcs.Spec.Template)
}

// cohortSets are the live cohort frontend PodCliqueSets of dgd holding key, from the
// cache, oldest first.
func (b *Backend) cohortSets(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) ([]*grovev1.PodCliqueSet, error) {
	var list grovev1.PodCliqueSetList
	if err := backends.ListControlled(ctx, b.Client, &list, dgd); err != nil {
		return nil, fmt.Errorf("listing PodCliqueSets of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	var out []*grovev1.PodCliqueSet
	for i := range list.Items {
		pcs := &list.Items[i]
		if svc, ok := cohortService(pcs); ok && svc == key.Service && workerHash(pcs) == key.Hash && pcs.DeletionTimestamp.IsZero() {
			out = append(out, pcs)
		}
	}
	sortOldestFirst(out)
	return out, nil
}

func sortOldestFirst(sets []*grovev1.PodCliqueSet) {
	sort.SliceStable(sets, func(i, j int) bool {
		a, b := sets[i].CreationTimestamp, sets[j].CreationTimestamp
		return a.Before(&b) || a.Equal(&b) && sets[i].Name < sets[j].Name
	})
}

// cohortName is the name of the PodCliqueSet holding key with template: the live one's;
// for a key nothing holds, the key's pick (cohortKeyID); beside a live one of another
// template, a pick of its own. From `{dgd}-1` on, at most max characters.
func (b *Backend) cohortName(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key backends.Key, template string, max int) (string, string, error) {
	live, err := b.cohortSets(ctx, dgd, key)
	if err != nil {
		return "", "", err
	}
	for _, pcs := range live {
		if cohortTemplate(pcs) == template {
			b.picked.forget(dgd.UID, cohortKeyID(key))
			return pcs.Name, cohortKeyID(key), nil
		}
	}
	id := cohortID(key, template)
	if len(live) == 0 {
		id = cohortKeyID(key)
	}
	name, err := b.nameFor(ctx, dgd, id, 1, max)
	return name, id, err
}

// ensureCohort makes the PodCliqueSet of a cohort's frontend sw with its template
// exist, created at sw.Replicas; one that exists is left as it is (its replicas move
// only through Scale: ServiceWorkload.InPlace), and one of another template beside it
// stays until the controller deletes it (Observe reports it Outdated).
func (b *Backend) ensureCohort(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) error {
	places, h, err := stableTemplate(dgd, sw, b.Config)
	if err != nil {
		return err
	}
	name, pick, err := b.cohortName(ctx, dgd, sw.Key, h, room(places))
	if err != nil {
		return err
	}
	want, err := renderCohort(dgd, sw, name, h, b.Config)
	if err != nil {
		return err
	}
	_, err = b.create(ctx, dgd, want, cohortID(sw.Key, h), pick)
	return err
}

// renderCohort builds PodCliqueSet name holding one cohort frontend's template (stable
// hash h): labelled with the revision's worker hash, the service and h.
func renderCohort(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload, name, h string, cfg renderpkg.Config) (*grovev1.PodCliqueSet, error) {
	tmpl, places, err := renderTemplate(dgd, []backends.ServiceWorkload{sw}, name, cfg)
	if err != nil {
		return nil, err
	}
	return newPodCliqueSet(dgd, name, cohortLabels(dgd, sw.Key, h), tmpl, places), nil
}

// cohortLabels are the labels of a cohort frontend's PodCliqueSet (h "": not known,
// left out).
func cohortLabels(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key, h string) map[string]string {
	labels := pcsLabels(dgd, key.Hash)
	labels[v1alpha1.LabelService] = backends.Labels(dgd, key.Service, "")[v1alpha1.LabelService]
	if h != "" {
		labels[LabelStableHash] = h
	}
	return labels
}

// outdatedCohorts lists the cohort frontend PodCliqueSets (by name) that are not, or
// will not be, their key's current one. Of a key's live ones, the one running the
// template the spec renders for it is current and the others outdated. When none runs
// it: on the update revision (status.updateWorkerHash), whose frontend is the spec's,
// every one is outdated, so the controller knows that its Ensure makes the new
// template's beside them (decide's updateCohortFronts: a frontend-only change); on an
// old cohort, which keeps the frontend of its own revision whatever the spec's is, the
// newest is current (one alone is never outdated).
func (b *Backend) outdatedCohorts(dgd *v1alpha1.DynamoGraphDeployment, sets []*grovev1.PodCliqueSet) map[string]bool {
	byKey := map[backends.Key][]*grovev1.PodCliqueSet{}
	for _, pcs := range sets {
		if svc, ok := cohortService(pcs); ok && pcs.DeletionTimestamp.IsZero() {
			k := backends.Key{Service: svc, Hash: workerHash(pcs)}
			byKey[k] = append(byKey[k], pcs)
		}
	}
	out := map[string]bool{}
	for key, live := range byKey {
		sortOldestFirst(live)
		var current *grovev1.PodCliqueSet
		h, ok := b.specTemplate(dgd, key)
		for _, pcs := range live {
			if ok && cohortTemplate(pcs) == h {
				current = pcs
			}
		}
		if current == nil && !(ok && key.Hash == dgd.Status.UpdateWorkerHash) {
			current = live[len(live)-1]
		}
		for _, pcs := range live {
			out[pcs.Name] = pcs != current
		}
	}
	return out
}

// specTemplate is the stable hash of the template dgd's spec renders for a cohort
// frontend key, if the spec has that frontend.
func (b *Backend) specTemplate(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) (string, bool) {
	svc := dgd.Spec.Services[key.Service]
	if svc == nil || svc.IsWorker() {
		return "", false
	}
	_, h, err := stableTemplate(dgd, backends.ServiceWorkload{Key: key, Spec: svc, Replicas: svc.DesiredReplicas()}, b.Config)
	return h, err == nil
}
