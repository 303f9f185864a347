package deployment_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// Issue 23, item 1: a write the API server refuses leaves the DGD with a status that
// says so (Ready False, Stalled True or Reconciling True, the object and the API
// server's own message, a Warning Event), touches nothing running, and a fix recovers.
var _ = Describe("a write the API server refuses", func() {
	// running is what the DGD's workloads run: name -> replicas and generation.
	running := func(ns string) map[string]string {
		ds, err := env.Deployments(ctx, ns, "refused")
		Expect(err).NotTo(HaveOccurred())
		out := map[string]string{}
		for _, d := range ds {
			out[d.Name] = fmt.Sprintf("replicas %d generation %d", ptr.Deref(d.Spec.Replicas, 0), d.Generation)
		}
		return out
	}
	It("a volume mount of no volume of the pod: Stalled, WriteRefused, the Deployment and the API server's field message; the mount removed recovers", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "refused").Disagg(1, 1, "vllm:v1").Obj())
		before := running(ns)
		update(ns, "refused", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
		})
		// The API server's words (k8s.io/kubernetes pkg/apis/core/validation
		// ValidateVolumeMounts: a mount names a volume of the pod), a reference across
		// two lists that admission leaves to the first write (docs/reference.md, "Strings
		// the operator writes"). This case was an Ingress class that is no DNS name
		// until admission refused that too (issue 38), as it refuses the issue 23
		// example, an Ingress host.
		halted(ns, "refused", v1alpha1.ReasonWriteRefused, true, "Deployment "+ns+"/", "volumeMounts", "Not found", "cache")
		Expect(running(ns)).To(Equal(before), "nothing running changed")
		update(ns, "refused", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.VolumeMounts = nil
		})
		_, err := env.Drive(ctx, ns, "refused", -1, 10, func(s harness.Snapshot) bool {
			return meta.IsStatusConditionTrue(s.DGD.Status.Conditions, v1alpha1.ConditionReady) && s.DGD.Status.ObservedGeneration == s.DGD.Generation
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(meta.IsStatusConditionTrue(getDGD(ns, "refused").Status.Conditions, v1alpha1.ConditionStalled)).To(BeFalse())
	})

	// A ValidatingAdmissionPolicy refuses the new revision's Deployments (the image
	// "vllm:refused"), as a cluster's policy would: with reason Invalid the API server
	// answers 422, with Forbidden 403 (admissionregistration/v1 Validation.Reason).
	for _, tc := range []struct {
		what    string
		reason  metav1.StatusReason
		status  string
		stalled bool
	}{
		{"denied as Invalid (422): Stalled, WriteRefused; a spec that passes recovers", metav1.StatusReasonInvalid, v1alpha1.ReasonWriteRefused, true},
		{"denied as Forbidden (403): Reconciling, WriteForbidden, retried; the policy removed recovers", metav1.StatusReasonForbidden, v1alpha1.ReasonWriteForbidden, false},
	} {
		It("a new revision's Deployment an admission policy "+tc.what, func() {
			ns := newNamespace()
			name := "refuse-" + ns
			policy := &admissionv1.ValidatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionv1.ValidatingAdmissionPolicySpec{
					FailurePolicy: ptr.To(admissionv1.Fail),
					MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
						RuleWithOperations: admissionv1.RuleWithOperations{
							Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
							Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
						}}}},
					Validations: []admissionv1.Validation{{
						Expression: "object.spec.template.spec.containers.all(c, c.image != 'vllm:refused')",
						Message:    "the image vllm:refused is not allowed here",
						Reason:     ptr.To(tc.reason),
					}},
				},
			}
			binding := &admissionv1.ValidatingAdmissionPolicyBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
					PolicyName:        name,
					ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
					MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
						MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
				},
			}
			Expect(env.Client.Create(ctx, policy)).To(Succeed())
			Expect(env.Client.Create(ctx, binding)).To(Succeed())
			DeferCleanup(func() {
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, binding))).To(Succeed())
				Expect(client.IgnoreNotFound(env.Client.Delete(ctx, policy))).To(Succeed())
			})
			By("the policy is in force (a dry run of such a Deployment is refused)")
			probe := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "vllm:refused"}}},
					},
				},
			}
			Eventually(func() error { return env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll) }).Should(MatchError(ContainSubstring("vllm:refused is not allowed")))

			deploy(harness.NewDGD(ns, "refused").Disagg(1, 1, "vllm:v1").Rollout("1", "0").Obj())
			before := running(ns)
			update(ns, "refused", harness.Image("vllm:refused"))
			halted(ns, "refused", tc.status, tc.stalled, "Deployment "+ns+"/refused-", "the image vllm:refused is not allowed here")
			Expect(running(ns)).To(Equal(before), "nothing running changed")

			By("the fix: another image (revision 3), or the policy gone (revision 2 goes on)")
			revision := int64(2)
			if tc.stalled {
				update(ns, "refused", harness.Image("vllm:v2"))
				revision = 3
			} else {
				Expect(env.Client.Delete(ctx, binding)).To(Succeed())
			}
			_, err := env.Drive(ctx, ns, "refused", -1, 30, func(s harness.Snapshot) bool {
				return s.Completed() && s.DGD.Status.UpdateRevisionNumber == revision &&
					meta.IsStatusConditionTrue(s.DGD.Status.Conditions, v1alpha1.ConditionReady)
			})
			Expect(err).NotTo(HaveOccurred())
		})
	}
})

// halted waits for DGD name's Ready condition to be False with reason, Stalled True
// (stalled) or Reconciling True (not), a message containing each of words, at the DGD's
// generation, and a Warning Event of that reason about it.
func halted(ns, name, reason string, stalled bool, words ...string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := getDGD(ns, name)
		c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(reason))
		for _, w := range words {
			g.Expect(c.Message).To(ContainSubstring(w))
		}
		g.Expect(c.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionStalled)).To(Equal(stalled))
		g.Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionReconciling)).To(Equal(!stalled))
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var found bool
		for _, e := range list.Items {
			found = found || e.Reason == reason && e.Type == corev1.EventTypeWarning && e.Regarding.Name == name
		}
		g.Expect(found).To(BeTrue(), "a Warning Event "+reason)
	}).Should(Succeed())
}
