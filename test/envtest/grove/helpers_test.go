package grove_test

import (
	"slices"
	"strings"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	. "github.com/onsi/gomega"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
)

// deploy creates a DGD and drives it to its first completed revision. A watcher of its
// live workloads (PodCliques and PodCliqueScalingGroups under their PodCliqueSets)
// judges surge and prefill-with-decode at every write and ratio, orphans and the
// status's account at every pass boundary, until the spec ends.
func deploy(obj *v1alpha1.DynamoGraphDeployment) harness.Snapshot {
	e2e.WatchSpec(ctx, env.Config, obj.Namespace, obj.Name, e2e.Options{Grove: true})
	s, err := env.Deploy(ctx, obj, completed)
	Expect(err).NotTo(HaveOccurred())
	return s
}

// update applies a change to the live DGD.
func update(ns, name string, change func(*v1alpha1.DynamoGraphDeployment)) {
	Expect(env.Update(ctx, ns, name, change)).To(Succeed())
}

// stablePCS is the live PodCliqueSet of a stable service (labelled with it), or nil.
func stablePCS(s harness.Snapshot, service string) *grovev1.PodCliqueSet {
	for i := range s.PCS {
		p := &s.PCS[i]
		if p.Labels[v1alpha1.LabelService] == service && p.Labels[v1alpha1.LabelWorkerHash] == "" && p.DeletionTimestamp.IsZero() {
			return p
		}
	}
	return nil
}

// frontendOn reports whether the frontend runs image in exactly one PodCliqueSet (its
// old one is gone).
func frontendOn(s harness.Snapshot, image string) bool {
	n := 0
	for _, p := range s.PCS {
		if p.Labels[v1alpha1.LabelWorkerHash] == "" && p.DeletionTimestamp.IsZero() {
			n++
		}
	}
	p := stablePCS(s, "Frontend")
	return n == 1 && p != nil && p.Spec.Template.Cliques[0].Spec.PodSpec.Containers[0].Image == image
}

// names lists a template's cliques and scaling groups (with their cliques), sorted.
func names(t grovev1.PodCliqueSetTemplateSpec) string {
	var out []string
	for _, c := range t.Cliques {
		out = append(out, c.Name)
	}
	for _, g := range t.PodCliqueScalingGroupConfigs {
		out = append(out, g.Name+"["+strings.Join(g.CliqueNames, ",")+"]")
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
