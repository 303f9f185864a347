package e2e

import (
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
)

// The suite runs the operator as its own ServiceAccount bound to config/rbac
// (operatorConfig): each rule issue 38 added or changed, removed from the live
// ClusterRole, is a DGD that shows the refusal (Ready False, WriteForbidden, naming the
// resource) with nothing else of it written: the suite fails without the rule
// (docs/reference.md, "The operator's RBAC"). The API server's RBAC authorizer reads
// ClusterRoles through an informer, so the change holds within the next requests.
var _ = Describe("the operator's ClusterRole without one of its rules", func() {
	DescribeTable("is a DGD that names the refused write",
		func(group, res, verb string, obj func(ns string) client.Object, want string) {
			withoutRule(group, res, verb)
			o := obj(newNamespace())
			Expect(k8s.Create(ctx, o)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, o))).To(Succeed()) })
			Eventually(func(g Gomega) {
				var d v1alpha1.DynamoGraphDeployment
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), &d)).To(Succeed())
				c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(v1alpha1.ReasonWriteForbidden))
				g.Expect(c.Message).To(ContainSubstring(want))
			}, RolloutTimeout, 200*time.Millisecond).Should(Succeed())
		},
		// Issue 38 narrowed Secrets to create: the TRT-LLM gangs' SSH key.
		Entry("secrets create (the TRT-LLM gangs' SSH key)", "", "secrets", "create", func(ns string) client.Object {
			b, err := harness.ReadBeta(filepath.Join(cluster.RepoRoot(), "test", "testdata", "dynamo", "trtllm-disagg-multinode.yaml"))
			Expect(err).NotTo(HaveOccurred())
			b.Namespace = ns
			for i := range b.Spec.Components {
				if c := &b.Spec.Components[i]; c.Multinode != nil {
					c.PodTemplate.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("1")
				}
			}
			return b
		}, "secrets"),
		// Issue 36 added the HTTPRoutes of trafficRouting.gatewayAPI.
		Entry("httproutes create (trafficRouting.gatewayAPI)", "gateway.networking.k8s.io", "httproutes", "create", func(ns string) client.Object {
			startGateway(ns, "public")
			d := throughGateway(gpus(upgradable(ns, "gw", 1, 1).Obj()), "public", 0)
			d.Spec.Rollout.Frontends = v1alpha1.FrontendsPerRevision
			return d
		}, "httproutes"),
	)
})

// withoutRule removes verb on group/res from the operator's ClusterRole until the spec
// ends (a rule left with no verb goes).
func withoutRule(group, res, verb string) {
	var role rbacv1.ClusterRole
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "manager-role"}, &role)).To(Succeed())
	before := role.DeepCopy()
	removed := false
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb) && len(r.ResourceNames) == 0 {
			removed = true
			// the rule's other resources keep every verb; res keeps the others
			if others := slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == res }); len(others) > 0 {
				o := r.DeepCopy()
				o.Resources = others
				rules = append(rules, *o)
			}
			if verbs := slices.DeleteFunc(slices.Clone(r.Verbs), func(s string) bool { return s == verb }); len(verbs) > 0 {
				o := r.DeepCopy()
				o.Resources, o.Verbs = []string{res}, verbs
				rules = append(rules, *o)
			}
			continue
		}
		rules = append(rules, r)
	}
	Expect(removed).To(BeTrue(), "config/rbac grants %s on %s.%s", verb, res, group)
	role.Rules = rules
	Expect(k8s.Update(ctx, &role)).To(Succeed())
	DeferCleanup(func() {
		Eventually(func() error {
			var now rbacv1.ClusterRole
			if err := k8s.Get(ctx, client.ObjectKey{Name: "manager-role"}, &now); err != nil {
				return err
			}
			now.Rules = before.Rules
			return k8s.Update(ctx, &now)
		}).Should(Succeed())
	})
}
