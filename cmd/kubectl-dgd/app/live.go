package app

import (
	"context"
	"fmt"
	"slices"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// live is what "kubectl dgd get" shows: the DGD, its revisions, and the workloads and
// pods that run now, read from the API server in one go.
type live struct {
	dgd     *v1alpha1.DynamoGraphDeployment
	revs    []*appsv1.ControllerRevision
	deploys []appsv1.Deployment
	lwss    []lwsv1.LeaderWorkerSet
	pcss    []grovev1.PodCliqueSet
	pcsgs   []grovev1.PodCliqueScalingGroup
	cliques []grovev1.PodClique
	pods    []corev1.Pod
}

// kinds lists the workload kinds the DGD's services run on, from its spec (backend and
// multinode services) and status (each service's workloadKind): the only kinds "get"
// lists and watches, so a cluster without LeaderWorkerSet or Grove CRDs is never asked
// for them.
func kinds(dgd *v1alpha1.DynamoGraphDeployment) (lws, grove bool) {
	switch dgd.BackendOrDefault() {
	case v1alpha1.BackendLeaderWorkerSet:
		lws = true
	case v1alpha1.BackendGrove:
		grove = true
	case v1alpha1.BackendAuto:
		for _, s := range dgd.Spec.Services {
			lws = lws || s != nil && s.IsMultinode()
		}
	}
	for _, ss := range dgd.Status.Services {
		lws = lws || ss.WorkloadKind == "LeaderWorkerSet"
		grove = grove || ss.WorkloadKind == "PodCliqueSet"
	}
	return lws, grove
}

// read lists everything of DGD name: its revisions, and the Deployments,
// LeaderWorkerSets, Grove objects and pods labelled with its name. Grove's
// PodCliqueScalingGroups carry Grove's labels only: they are those part of one of the
// DGD's PodCliqueSets.
func (s *session) read(ctx context.Context, name string) (*live, error) {
	dgd, revs, err := s.history(ctx, name)
	if err != nil {
		return nil, err
	}
	l := &live{dgd: dgd, revs: revs}
	graph := client.MatchingLabels{v1alpha1.LabelGraph: name}
	var deploys appsv1.DeploymentList
	var pods corev1.PodList
	if err := s.listAll(ctx, graph, &deploys, &pods); err != nil {
		return nil, err
	}
	l.deploys, l.pods = deploys.Items, pods.Items
	withLWS, withGrove := kinds(dgd)
	if withLWS {
		var lwss lwsv1.LeaderWorkerSetList
		if err := s.listAll(ctx, graph, &lwss); err != nil {
			return nil, err
		}
		l.lwss = lwss.Items
	}
	if withGrove {
		if err := s.readGrove(ctx, l, graph); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// readGrove lists the DGD's PodCliqueSets and PodCliques (labelled with its name) and
// the PodCliqueScalingGroups part of those PodCliqueSets (Grove labels them
// app.kubernetes.io/part-of: <podcliqueset>, and with nothing of ours).
func (s *session) readGrove(ctx context.Context, l *live, graph client.MatchingLabels) error {
	var pcss grovev1.PodCliqueSetList
	var cliques grovev1.PodCliqueList
	var pcsgs grovev1.PodCliqueScalingGroupList
	if err := s.listAll(ctx, graph, &pcss, &cliques); err != nil {
		return err
	}
	if err := s.listAll(ctx, client.MatchingLabels{}, &pcsgs); err != nil {
		return err
	}
	l.pcss, l.cliques = pcss.Items, cliques.Items
	for _, g := range pcsgs.Items {
		if slices.ContainsFunc(l.pcss, func(p grovev1.PodCliqueSet) bool { return p.Name == g.Labels[apicommon.LabelPartOfKey] }) {
			l.pcsgs = append(l.pcsgs, g)
		}
	}
	return nil
}

// listAll lists each of lists in the session's namespace with sel. A kind the API
// server does not serve (its CRD not installed) is an error that names it.
func (s *session) listAll(ctx context.Context, sel client.MatchingLabels, lists ...client.ObjectList) error {
	for _, list := range lists {
		if err := s.client.List(ctx, list, client.InNamespace(s.namespace), sel); err != nil {
			if meta.IsNoMatchError(err) {
				return fmt.Errorf("listing %T: the cluster does not serve it (is its CRD installed?): %w", list, err)
			}
			return err
		}
	}
	return nil
}
