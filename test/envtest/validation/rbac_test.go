package validation_test

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
)

// Issue 23, least privilege: what the shipped RBAC (config/rbac, applied as is in its
// namespace "system") lets the operator's ServiceAccount do with Secrets, asked of the
// API server's own RBAC authorizer (SubjectAccessReview).
var _ = Describe("the shipped RBAC and Secrets", func() {
	It("grants the webhook certificate's Secret by name in the operator's namespace, no list, watch or get anywhere else, and only the TRT-LLM SSH key's create elsewhere", func() {
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "system"}})).To(Succeed())
		for _, f := range []string{"service_account.yaml", "role.yaml", "role_binding.yaml"} {
			objs, err := cluster.ReadObjects(filepath.Join(harness.RepoRoot(), "config", "rbac", f))
			Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				Expect(env.Client.Create(ctx, o)).To(Succeed(), "%s %s", f, o.GetName())
			}
		}
		may := func(verb, ns, name string) bool {
			GinkgoHelper()
			r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:system:controller-manager",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: verb, Resource: "secrets", Name: name}}}
			Expect(env.Client.Create(ctx, r)).To(Succeed())
			return r.Status.Allowed
		}
		// The API server's RBAC authorizer reads Roles, ClusterRoles and their bindings
		// through listers of its shared informers (kubernetes pkg/kubeapiserver/authorizer
		// config.go hands rbac.New the Roles', RoleBindings', ClusterRoles' and
		// ClusterRoleBindings' listers), so a review right after the create can be answered before
		// they have seen it: a CI run was refused here. Wait until one grant through the
		// RoleBinding and one through the ClusterRoleBinding are seen; every object is
		// then in those caches, and the refusals below are answers, not lag.
		Eventually(func() bool { return may("get", "system", "dgd-rollout-webhook-cert") }).Should(BeTrue())
		Eventually(func() bool { return may("create", "team-a", "") }).Should(BeTrue())
		Expect(may("update", "system", "dgd-rollout-webhook-cert")).To(BeTrue())
		Expect(may("create", "system", "")).To(BeTrue())
		Expect(may("update", "system", "another-secret")).To(BeFalse(), "update of another Secret of its namespace")
		Expect(may("update", "team-a", "dgd-rollout-webhook-cert")).To(BeFalse(), "update outside its namespace")
		for _, verb := range []string{"list", "watch", "delete", "patch"} {
			Expect(may(verb, "team-a", "")).To(BeFalse(), verb)
			Expect(may(verb, "system", "")).To(BeFalse(), verb)
		}
		// The one cluster-wide grant: a DGD with multinode TRT-LLM workers gets the SSH
		// key Secret Dynamo's gangs mount (decide/platform.go), created in the DGD's
		// namespace; AlreadyExists is the answer, so no Secret is ever read (issue 38).
		Expect(may("create", "team-a", "")).To(BeTrue())
		Expect(may("get", "team-a", "llm-mpi-ssh")).To(BeFalse(), "get of a Secret the operator did not create")
		Expect(may("get", "team-a", "")).To(BeFalse(), "get of any Secret")
	})
})
