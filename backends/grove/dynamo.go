package grove

import (
	"context"
	"fmt"
	"slices"
	"sort"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// The PodCliqueSet Dynamo's own operator runs a graph in (the take-over,
// controllers/dynamo.go). Dynamo renders one PodCliqueSet named after the DGD, replicas
// 1 (ai-dynamo/dynamo deploy/operator/internal/dynamo/graph.go GenerateGrovePodCliqueSet):
// per component either a standalone clique named after it, lower-cased, with the
// component's replicas (expandSingleNodeRoles; minAvailable the component's, else 1:
// buildCliqueForRole), or for a multinode component a scaling group named after it
// whose cliques are `<component>-ldr` (1 pod) and `<component>-wkr` (nodeCount-1 pods),
// replicas the component's, minAvailable the component's, else 1
// (expandMultinodeRoles, buildGroveScalingGroupConfig). Every clique's labels name the
// component (nvidia.com/dynamo-component, generateLabels), and a worker's carry
// Dynamo's worker hash only when its pod template does. These are the shapes this
// backend's own PodCliqueSets have (placements reads them alike); the others Dynamo
// renders are not taken over (DynamoComponents says which).

// DynamoComponent is one component Dynamo's operator runs in its PodCliqueSet: a
// workload keyed by the component and its cliques' worker hash ("" when they carry
// none), read from its PodClique or PodCliqueScalingGroup as this backend observes its
// own, and the least replicas Grove keeps it whole at.
type DynamoComponent struct {
	backends.Workload
	// Floor is the clique's or scaling group's minAvailable (at least 1): below it Grove
	// reports the replica's gang breached and terminates the whole PodCliqueSet replica
	// (every component of Dynamo's, its frontend included) after terminationDelay; at
	// zero it warns AllScheduledReplicasLost (FACTS.md). Dynamo's operator sets it
	// explicitly (buildCliqueForRole, buildGroveScalingGroupConfig).
	Floor int32
}

// DynamoShape says why Dynamo's PodCliqueSet pcs is of a shape the take-over does not
// handle, or "": one replica, each component in one standalone clique or in one
// scaling group of a leader and a worker clique, every clique naming its component.
// Not handled: Dynamo's GPU memory service layouts (cliques `<component>-gms-<rank>`
// beside the engine's: expandSingleNodeGMSRoles, expandMultinodeGMSRoles) and a
// single-node component forced into a scaling group (expandSingleNodeScalingGroupRoles:
// its one clique is no `-ldr` leader, so no pod of it would count as routable here and
// the planner would drain it at once).
func DynamoShape(pcs *grovev1.PodCliqueSet) string {
	if pcs.Spec.Replicas != 1 {
		return fmt.Sprintf("it runs %d replicas (Dynamo's operator renders 1)", pcs.Spec.Replicas)
	}
	inGroup := map[string]bool{}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		want := []string{g.Name + LeaderSuffix, g.Name + WorkerSuffix}
		have := slices.Clone(g.CliqueNames)
		sort.Strings(have)
		if !slices.Equal(have, want) {
			return fmt.Sprintf("its scaling group %s holds cliques %v, not a leader %s and a worker %s", g.Name, g.CliqueNames, want[0], want[1])
		}
		for _, c := range g.CliqueNames {
			inGroup[c] = true
		}
	}
	standalone := map[string]int{}
	for _, c := range pcs.Spec.Template.Cliques {
		svc := c.Labels[v1alpha1.LabelService]
		if svc == "" {
			return fmt.Sprintf("its clique %s names no component (label %s)", c.Name, v1alpha1.LabelService)
		}
		if !inGroup[c.Name] {
			standalone[svc]++
		}
	}
	for svc, pl := range placements(pcs) {
		if n := standalone[svc]; n > 1 || n == 1 && pl.Group != "" {
			return fmt.Sprintf("component %s runs in several cliques (a GPU memory service layout)", svc)
		}
	}
	return ""
}

// ObserveDynamo reads the components of Dynamo's PodCliqueSet pcs (of a shape
// DynamoShape accepts): their PodCliques and PodCliqueScalingGroups (in the cache,
// which holds Grove's objects unfiltered) as this backend observes its own, each
// grouped under pcs (deleting pcs removes them all).
func (b *Backend) ObserveDynamo(ctx context.Context, pcs *grovev1.PodCliqueSet) ([]DynamoComponent, error) {
	var out []DynamoComponent
	for svc, pl := range placements(pcs) {
		key := backends.Key{Service: svc, Hash: cliqueHash(pcs, svc)}
		w, err := b.observeOne(ctx, pcs, key, pl)
		if err != nil {
			return nil, err
		}
		out = append(out, DynamoComponent{Workload: w, Floor: floor(pcs, pl)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// cliqueHash is the worker hash the cliques of component svc carry, or "".
func cliqueHash(pcs *grovev1.PodCliqueSet, svc string) string {
	for _, c := range pcs.Spec.Template.Cliques {
		if c.Labels[v1alpha1.LabelService] == svc && c.Labels[v1alpha1.LabelWorkerHash] != "" {
			return c.Labels[v1alpha1.LabelWorkerHash]
		}
	}
	return ""
}

// floor is the minAvailable of a placement's scaling group or standalone clique (at
// least 1; Grove's defaulting sets an unset clique's to its replicas).
func floor(pcs *grovev1.PodCliqueSet, pl placement) int32 {
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		if pl.Group != "" && g.Name == pl.Group {
			return max(ptr.Deref(g.MinAvailable, 1), 1)
		}
	}
	for _, c := range pcs.Spec.Template.Cliques {
		if pl.Clique != "" && c.Name == pl.Clique {
			return max(ptr.Deref(c.Spec.MinAvailable, c.Spec.Replicas), 1)
		}
	}
	return 1
}

// ScaleDynamo scales component service of Dynamo's PodCliqueSet named pcs as this
// backend scales its own (Scale): the PodClique's or PCSG's scale subresource, which
// Grove keeps (its PodCliqueSet controller rewrites an existing PodClique's spec from
// the template but keeps its replicas, "if an HPA is mutating the number of replicas,
// then it should not be overwritten by the template spec replicas": ai-dynamo/grove
// operator/internal/controller/podcliqueset/components/podclique/podclique.go
// buildResource; a PCSG's replicas are set only when it is created, "post-creation
// scaling must be done directly on the PCSG resource, not via PCS template":
// components/podcliquescalinggroup/podcliquescalinggroup.go buildResource; FACTS.md: a
// scale sticks, a template count reaches no existing object), and the template in step
// for an object Grove recreates. pcs is read past the cache (it is not ours).
func (b *Backend) ScaleDynamo(ctx context.Context, namespace, pcs, service string, replicas int32) error {
	r := b.Reader
	if r == nil {
		r = b.Client
	}
	var set grovev1.PodCliqueSet
	key := client.ObjectKey{Namespace: namespace, Name: pcs}
	if err := r.Get(ctx, key, &set); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting Dynamo's PodCliqueSet %s: %w", key, err)
	}
	pl, ok := placements(&set)[service]
	if !ok {
		return fmt.Errorf("dynamo's PodCliqueSet %s holds no component %s", key, service)
	}
	if err := b.scaleObject(ctx, &set, objectName(set.Name, pl), pl, replicas); err != nil {
		return err
	}
	return b.scaleTemplate(ctx, &set, pl, replicas)
}
