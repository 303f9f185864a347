package plugin_test

import (
	"bytes"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/kubectl-dgd/app"
	"github.com/dgd-rollout/operator/test/harness"
)

// complete runs the shell completion of "kubectl dgd args..." and an empty word in ns, as a shell asks
// the plugin (cobra's hidden __complete command), and returns the candidates it prints
// (its last line, the directive, left out).
func complete(ns string, args ...string) []string {
	GinkgoHelper()
	var out, errOut bytes.Buffer
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	cmd := app.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, flags)
	cmd.SetArgs(append(append([]string{"__complete"}, args...), "--namespace", ns, ""))
	Expect(cmd.ExecuteContext(ctx)).To(Succeed(), errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	Expect(lines[len(lines)-1]).To(HavePrefix(":"), "the directive ends the output")
	return lines[:len(lines)-1]
}

var _ = Describe("set image", func() {
	It("starts a rollout with the command line as change cause, in v1beta1 too", func() {
		ns := newNamespace()
		deploy(withCause(harness.NewDGD(ns, "si").Disagg(2, 1, "vllm:v1").Obj(), "kubectl apply -f disagg.yaml"))
		t := &transcript{ns: ns}

		t.must("set", "image", "si", "prefill=vllm:v2", "decode=vllm:v2")
		Expect(workerImages(ns, "si")).To(Equal(map[string]string{"prefill": "vllm:v2", "decode": "vllm:v2"}))
		var b v1beta1.DynamoGraphDeployment
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "si"}, &b)).To(Succeed())
		for _, c := range b.Spec.Components {
			if c.ComponentType != v1beta1.ComponentTypeFrontend {
				Expect(c.PodTemplate.Spec.Containers[0].Name).To(Equal("main"))
				Expect(c.PodTemplate.Spec.Containers[0].Image).To(Equal("vllm:v2"), "the main container of %s, read in v1beta1", c.ComponentName)
			}
		}
		_, err := env.Drive(ctx, ns, "si", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred(), "the new image is revision 2, rolled out")
		gen := getDGD(ns, "si").Generation

		By("nothing to change, an unknown service, a bad argument: no write")
		t.must("set", "image", "si", "prefill=vllm:v2")
		t.fails("set", "image", "si", "prefill=vllm:v3", "Prefill=vllm:v3")
		t.fails("set", "image", "si", "prefill")
		Expect(getDGD(ns, "si").Generation).To(Equal(gen))

		By("--change-cause, and '*' for every service")
		t.must("set", "image", "si", "*=vllm:v3", "--change-cause=vllm 3 everywhere")
		_, err = env.Drive(ctx, ns, "si", -1, 20, harness.CompletedAt(3))
		Expect(err).NotTo(HaveOccurred())
		Expect(workerImages(ns, "si")).To(Equal(map[string]string{"prefill": "vllm:v3", "decode": "vllm:v3"}))
		t.must("rollout", "history", "si")
		expectGolden("set-image", t.String())
	})
})

var _ = Describe("list", func() {
	It("prints every DGD with phase, 1-based step and update revision", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "plain").Disagg(2, 1, "vllm:v1").Obj())
		half := intstr.FromString("50%")
		obj := harness.NewDGD(ns, "stepped").Disagg(2, 2, "vllm:v1").Obj()
		obj.Spec.Rollout = &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{Partition: &half}, {Pause: &v1alpha1.RolloutPause{}}, {Pause: &v1alpha1.RolloutPause{}}}}
		deploy(obj)
		t := &transcript{ns: ns}
		t.must("set", "image", "stepped", "*=vllm:v2")
		_, err := env.Drive(ctx, ns, "stepped", -1, 20, atStep(2, 1))
		Expect(err).NotTo(HaveOccurred())
		t.must("list")
		expectGolden("list", t.String())

		all, err := kubectlDGD(ns, "list", "-A")
		Expect(err).NotTo(HaveOccurred())
		Expect(all).To(HavePrefix("NAMESPACE "))
		Expect(all).To(MatchRegexp(`(?m)^` + ns + ` +stepped +\S+ +Paused +2/3 +2$`))
		Expect(all).To(MatchRegexp(`(?m)^` + ns + ` +plain +\S+ +Completed +- +1$`))

		empty := &transcript{ns: newNamespace()}
		empty.must("list")
		Expect(empty.String()).To(HaveSuffix("No resources found in " + empty.ns + " namespace.\n"))
	})
})

var _ = Describe("shell completion", func() {
	It("offers the namespace's DGD names to every verb that takes one, and services to set image", func() {
		ns := newNamespace()
		Expect(env.Client.Create(ctx, harness.NewDGD(ns, "alpha").Disagg(1, 1, "vllm:v1").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, harness.NewDGD(ns, "beta").Disagg(1, 1, "vllm:v1").Obj())).To(Succeed())
		for _, verb := range [][]string{
			{"rollout", "history"}, {"rollout", "status"}, {"rollout", "undo"}, {"rollout", "pause"},
			{"rollout", "resume"}, {"rollout", "partition"}, {"rollout", "promote"}, {"rollout", "abort"},
			{"rollout", "retry"}, {"set", "image"}, {"restart"},
		} {
			Expect(complete(ns, verb...)).To(Equal([]string{"alpha", "beta"}), "kubectl dgd %s", strings.Join(verb, " "))
		}
		Expect(complete(ns, "rollout", "status", "alpha")).To(BeEmpty(), "one name only")
		Expect(complete(ns, "set", "image", "alpha", "decode=vllm:v2")).To(Equal([]string{"Frontend=", "prefill="}))
		Expect(complete(newNamespace(), "rollout", "status")).To(BeEmpty())
	})
})

var _ = Describe("restart", func() {
	It("sets Dynamo's spec.restart.id and keeps the strategy; the operator acts on it (no warning)", func() {
		ns := newNamespace()
		deploy(harness.NewDGD(ns, "rs").Disagg(1, 1, "vllm:v1").Obj())
		t := &transcript{ns: ns}
		t.must("restart", "rs", "--id=first")
		Expect(string(getDGD(ns, "rs").Spec.Restart.Raw)).To(MatchJSON(`{"id":"first"}`))
		change(ns, "rs", func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Restart.Raw = []byte(`{"id":"first","strategy":{"type":"Parallel"}}`)
		})
		t.must("restart", "rs", "--id=first")
		t.must("restart", "rs", "--id=second")
		Expect(string(getDGD(ns, "rs").Spec.Restart.Raw)).To(MatchJSON(`{"id":"second","strategy":{"type":"Parallel"}}`))
		t.fails("restart", "nope")
		expectGolden("restart", t.String())

		By("the operator acts on the last id: status.restart Completed, rollout status done")
		_, err := env.Drive(ctx, ns, "rs", -1, 40, func(s harness.Snapshot) bool {
			r := s.DGD.Status.Restart
			return s.Completed() && r != nil && r.ObservedID == "second" && r.Phase == v1alpha1.RestartPhaseCompleted
		})
		Expect(err).NotTo(HaveOccurred())
		out, err := kubectlDGD(ns, "rollout", "status", "rs")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("successfully rolled out"))
		out, err = kubectlDGD(ns, "get", "rs")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`Restart: +second Completed`))

		out, err = kubectlDGD(ns, "restart", "rs")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`restart requested \(id "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"\)`), "the default id is the time")
	})
})

var _ = Describe("set image on a DGD written in v1beta1", func() {
	It("changes the main container's image of that component and nothing else of the v1beta1 spec", func() {
		ns := newNamespace()
		var b v1beta1.DynamoGraphDeployment
		Expect(conversion.ToHub(harness.NewDGD(ns, "beta").Disagg(2, 1, "vllm:v1").Obj(), &b)).To(Succeed())
		Expect(env.Client.Create(ctx, &b)).To(Succeed())
		_, err := env.Drive(ctx, ns, "beta", -1, 10, harness.CompletedAt(1))
		Expect(err).NotTo(HaveOccurred())
		var before, after v1beta1.DynamoGraphDeployment
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "beta"}, &before)).To(Succeed())

		out, err := kubectlDGD(ns, "set", "image", "beta", "prefill=vllm:v2")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "beta"}, &after)).To(Succeed())
		want := before.Spec.DeepCopy()
		for i := range want.Components {
			if want.Components[i].ComponentName == "prefill" {
				want.Components[i].PodTemplate.Spec.Containers[0].Image = "vllm:v2"
			}
		}
		Expect(after.Spec).To(Equal(*want))
		Expect(after.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationChangeCause, "kubectl dgd set image beta prefill=vllm:v2"))
		Expect(after.Annotations).NotTo(HaveKey(conversion.AnnotationSpec), "nothing v1alpha1 cannot say was stashed")
		_, err = env.Drive(ctx, ns, "beta", -1, 20, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
	})
})
