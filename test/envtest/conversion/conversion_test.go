package conversion_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/harness"
)

func manifest(path ...string) *unstructured.Unstructured {
	raw, err := os.ReadFile(filepath.Join(append([]string{harness.RepoRoot()}, path...)...))
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal(raw, &u.Object)).To(Succeed())
	return u
}

// convertCalls is how many conversion requests the operator's webhook server answered
// (controller-runtime's webhook metrics of /convert, in this process).
func convertCalls() float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "webhook") == "/convert" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func typed[T any](u *unstructured.Unstructured, out *T) *T {
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)).To(Succeed())
	return out
}

var _ = Describe("the API server converts through the operator's /convert", func() {
	It("creates in v1alpha1, reads in v1beta1 (Dynamo's shape) and back unchanged", func() {
		before := convertCalls()
		ns := newNamespace()
		u := manifest("config", "samples", "disagg.yaml")
		u.SetNamespace(ns)
		Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		var wrote v1alpha1.DynamoGraphDeployment
		typed(u, &wrote)

		b := &unstructured.Unstructured{}
		b.SetAPIVersion("nvidia.com/v1beta1")
		b.SetKind("DynamoGraphDeployment")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), b)).To(Succeed())
		var hub v1beta1.DynamoGraphDeployment
		typed(b, &hub)
		Expect(hub.Spec.Components).To(HaveLen(3))
		byName := map[string]v1beta1.DynamoComponentDeploymentSharedSpec{}
		for _, c := range hub.Spec.Components {
			byName[c.ComponentName] = c
		}
		decode := byName["VllmDecodeWorker"]
		Expect(decode.ComponentType).To(Equal("decode"))
		Expect(decode.PodTemplate.Spec.Containers[0].Name).To(Equal("main"))
		Expect(decode.PodTemplate.Spec.Containers[0].Image).To(Equal("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0"))
		Expect(decode.PodTemplate.Spec.Containers[0].EnvFrom[0].SecretRef.Name).To(Equal("hf-token-secret"))
		Expect(decode.PodTemplate.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", "").String()).To(Equal("1"))
		Expect(hub.Annotations).To(HaveKey(conversion.AnnotationSpec), "dynamoNamespace and envFromSecret kept for v1alpha1")

		a := &unstructured.Unstructured{}
		a.SetAPIVersion("nvidia.com/v1alpha1")
		a.SetKind("DynamoGraphDeployment")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), a)).To(Succeed())
		var back v1alpha1.DynamoGraphDeployment
		typed(a, &back)
		Expect(equality.Semantic.DeepEqual(back.Spec, wrote.Spec)).To(BeTrue(), "v1alpha1 read back:\n%v\nwrote:\n%v", back.Spec, wrote.Spec)
		Expect(back.Annotations).NotTo(HaveKey(conversion.AnnotationSpec))
		Expect(convertCalls()).To(BeNumerically(">", before), "the API server called the operator's /convert")
	})

	It("creates a v1beta1 DGD and rolls it: the operator reads and writes v1beta1", func() {
		ns := newNamespace()
		u := manifest("config", "samples", "v1beta1", "disagg.yaml")
		u.SetNamespace(ns)
		Expect(env.Client.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed())
		_, err := env.Drive(ctx, ns, u.GetName(), -1, 10, harness.CompletedAt(1))
		Expect(err).NotTo(HaveOccurred())

		// A new image, written in v1beta1: a new worker revision, rolled to completion.
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "components")
		for _, c := range cs {
			cm := c.(map[string]any)
			if cm["type"] == "frontend" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(cm, "podTemplate", "spec", "containers")
			containers[0].(map[string]any)["image"] = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.1"
			Expect(unstructured.SetNestedSlice(cm, containers, "podTemplate", "spec", "containers")).To(Succeed())
		}
		Expect(unstructured.SetNestedSlice(u.Object, cs, "spec", "components")).To(Succeed())
		Expect(env.Client.Update(ctx, u)).To(Succeed())
		steps, err := env.Drive(ctx, ns, u.GetName(), 1, 40, harness.CompletedAt(2))
		Expect(err).NotTo(HaveOccurred())
		last := steps[len(steps)-1]
		Expect(last.DGD.Status.UpdateRevisionNumber).To(Equal(int64(2)))

		// The status, written by the operator as v1beta1, reads alike in both versions.
		b := &unstructured.Unstructured{}
		b.SetAPIVersion("nvidia.com/v1beta1")
		b.SetKind("DynamoGraphDeployment")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), b)).To(Succeed())
		var hub v1beta1.DynamoGraphDeployment
		typed(b, &hub)
		Expect(hub.Status.UpdateRevisionNumber).To(Equal(int64(2)))
		Expect(hub.Status.RollingUpdate.Phase).To(Equal(v1alpha1.RolloutCompleted))
		Expect(hub.Status.RollingUpdate.UpdatedComponents).To(ConsistOf("VllmDecodeWorker", "VllmPrefillWorker"))
		Expect(hub.Status.Components).To(HaveKey("VllmDecodeWorker"))
	})

	It("gives the same worker hash to a v1alpha1 and a v1beta1 manifest of the same graph", func() {
		hashes := map[string]string{}
		for _, path := range [][]string{{"config", "samples", "disagg.yaml"}, {"config", "samples", "v1beta1", "disagg.yaml"}} {
			ns := newNamespace()
			u := manifest(path...)
			u.SetNamespace(ns)
			Expect(env.Client.Create(ctx, u)).To(Succeed())
			s, err := env.WaitSettled(ctx, ns, u.GetName())
			Expect(err).NotTo(HaveOccurred())
			Expect(s.DGD.Status.UpdateWorkerHash).NotTo(BeEmpty())
			hashes[u.GetAPIVersion()] = s.DGD.Status.UpdateWorkerHash + " " + strings.TrimPrefix(s.DGD.Status.UpdateRevision, u.GetName())
		}
		Expect(hashes["nvidia.com/v1alpha1"]).To(Equal(hashes["nvidia.com/v1beta1"]), "worker hash and revision (graph hash)")
	})
})

var _ = Describe("storage", func() {
	crd := func() *apiextensionsv1.CustomResourceDefinition {
		var c apiextensionsv1.CustomResourceDefinition
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: app.CRDName}, &c)).To(Succeed())
		return &c
	}
	setStorage := func(version string) {
		Eventually(func() error {
			c := crd()
			for i := range c.Spec.Versions {
				c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == version
			}
			return env.Client.Update(ctx, c)
		}).Should(Succeed())
	}

	It("migrates objects stored in v1alpha1 to v1beta1 and narrows status.storedVersions to [v1beta1]", func() {
		// A cluster of before v1beta1: objects stored as v1alpha1.
		setStorage("v1alpha1")
		ns := newNamespace()
		var created []*unstructured.Unstructured
		for _, f := range []string{"disagg.yaml", "agg.yaml"} {
			u := manifest("config", "samples", f)
			u.SetNamespace(ns)
			// The CRD's new storage version reaches the API server's handler shortly after.
			Eventually(func() error { return env.Client.Create(ctx, u.DeepCopy()) }).Should(Succeed())
			created = append(created, u)
		}
		Eventually(func() []string { return crd().Status.StoredVersions }).Should(ContainElement("v1alpha1"))
		// While v1alpha1 is the storage version (an older CRD applied by a rollback),
		// the migration leaves storedVersions alone: objects are being stored in it.
		Expect(app.MigrateStorage(ctx, env.Config)).To(Succeed())
		Expect(crd().Status.StoredVersions).To(ContainElement("v1alpha1"))
		setStorage("v1beta1")
		Expect(crd().Status.StoredVersions).To(ConsistOf("v1alpha1", "v1beta1"))

		Expect(app.MigrateStorage(ctx, env.Config)).To(Succeed())
		Expect(crd().Status.StoredVersions).To(Equal([]string{"v1beta1"}))
		for _, u := range created {
			b := &unstructured.Unstructured{}
			b.SetAPIVersion("nvidia.com/v1beta1")
			b.SetKind("DynamoGraphDeployment")
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), b)).To(Succeed())
			comps, _, _ := unstructured.NestedSlice(b.Object, "spec", "components")
			Expect(comps).NotTo(BeEmpty(), u.GetName())
		}
		// Run again: nothing to do.
		Expect(app.MigrateStorage(ctx, env.Config)).To(Succeed())
	})

	It("our CRD applies over the CRD of a cluster that ran Dynamo (storedVersions [v1alpha1, v1beta1]); a CRD without v1alpha1 would not", func() {
		Eventually(func() error {
			c := crd()
			c.Status.StoredVersions = []string{"v1alpha1", "v1beta1"}
			return env.Client.Status().Update(ctx, c)
		}).Should(Succeed())
		raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "crd", "bases", "nvidia.com_dynamographdeployments.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var ours apiextensionsv1.CustomResourceDefinition
		Expect(yaml.Unmarshal(raw, &ours)).To(Succeed())
		live := crd()
		applied := live.DeepCopy()
		applied.Spec.Versions = ours.Spec.Versions
		Expect(env.Client.Update(ctx, applied)).To(Succeed())

		// The API server refuses dropping a stored version: what made our v1alpha1-only
		// CRD unappliable over Dynamo's.
		alphaOnly := crd()
		var versions []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range alphaOnly.Spec.Versions {
			if v.Name == "v1alpha1" {
				v.Storage = true
				versions = append(versions, v)
			}
		}
		alphaOnly.Spec.Versions = versions
		alphaOnly.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		Expect(env.Client.Update(ctx, alphaOnly)).To(MatchError(ContainSubstring("storedVersions")))

		Expect(app.MigrateStorage(ctx, env.Config)).To(Succeed())
		Expect(crd().Status.StoredVersions).To(Equal([]string{"v1beta1"}))
	})
})

var _ = Describe("printer columns", func() {
	It("are the same in both versions, with the same values (kubectl get dgd)", func() {
		ns := newNamespace()
		u := manifest("config", "samples", "v1beta1", "agg.yaml")
		u.SetNamespace(ns)
		Expect(env.Client.Create(ctx, u)).To(Succeed())
		_, err := env.Drive(ctx, ns, u.GetName(), -1, 10, harness.CompletedAt(1))
		Expect(err).NotTo(HaveOccurred())
		hc, err := rest.HTTPClientFor(env.Config)
		Expect(err).NotTo(HaveOccurred())
		table := func(version string) metav1.Table {
			base, _, err := rest.DefaultServerUrlFor(env.Config)
			Expect(err).NotTo(HaveOccurred())
			req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(base.String(), "/")+"/apis/nvidia.com/"+version+"/namespaces/"+ns+"/dynamographdeployments", nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
			resp, err := hc.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusOK), req.URL.String())
			var t metav1.Table
			Expect(json.NewDecoder(resp.Body).Decode(&t)).To(Succeed())
			return t
		}
		alpha, beta := table("v1alpha1"), table("v1beta1")
		var names []string
		for _, c := range beta.ColumnDefinitions {
			names = append(names, c.Name)
		}
		Expect(names).To(Equal([]string{"Name", "Ready", "Up-to-date", "Revision", "Phase", "Age"}))
		Expect(alpha.ColumnDefinitions).To(Equal(beta.ColumnDefinitions))
		Expect(beta.Rows).To(HaveLen(1))
		Expect(alpha.Rows[0].Cells[:5]).To(Equal(beta.Rows[0].Cells[:5]))
		Expect(beta.Rows[0].Cells[1]).To(Equal("5/5"))
		Expect(beta.Rows[0].Cells[4]).To(Equal("Completed"))
	})
})

var _ = Describe("rewriting a manifest in the other version", func() {
	// A DGD made from the v1alpha1 sample is rewritten as its v1beta1 twin: once with
	// the conversion annotation the stored object carries (kubectl apply keeps it), once
	// without (a manifest written from scratch and replaced): the same graph, so the
	// same revision and no rollout.
	for _, keepPayload := range []bool{true, false} {
		It(fmt.Sprintf("starts no rollout (annotation kept: %v)", keepPayload), func() {
			ns := newNamespace()
			u := manifest("config", "samples", "disagg.yaml")
			u.SetNamespace(ns)
			Expect(env.Client.Create(ctx, u)).To(Succeed())
			before, err := env.Drive(ctx, ns, u.GetName(), -1, 10, harness.CompletedAt(1))
			Expect(err).NotTo(HaveOccurred())
			twin, err := harness.ReadBeta(filepath.Join(harness.RepoRoot(), "config", "samples", "v1beta1", "disagg.yaml"))
			Expect(err).NotTo(HaveOccurred())
			Expect(harness.UpdateBeta(ctx, env.Client, ns, u.GetName(), func(d *v1beta1.DynamoGraphDeployment) {
				d.Spec = twin.Spec
				if !keepPayload {
					delete(d.Annotations, conversion.AnnotationSpec)
				}
				// A scale (never a revision) too: observedGeneration then says the
				// operator has acted on the rewritten spec.
				for i := range d.Spec.Components {
					if d.Spec.Components[i].ComponentName == "VllmDecodeWorker" {
						d.Spec.Components[i].Replicas = ptr.To(int32(3))
					}
				}
			})).To(Succeed())
			if !keepPayload {
				// The operator now sees another v1alpha1 spelling of the same graph.
				Eventually(func(g Gomega) {
					var d v1alpha1.DynamoGraphDeployment
					g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), &d)).To(Succeed())
					w := d.Spec.Services["VllmDecodeWorker"]
					g.Expect(w.EnvFromSecret).To(BeNil())
					g.Expect(w.DynamoNamespace).To(BeNil())
					g.Expect(w.ExtraPodSpec.MainContainer.EnvFrom).To(HaveLen(1))
				}).Should(Succeed())
			}
			var after harness.Snapshot
			Eventually(func(g Gomega) {
				after, err = env.WaitSettled(ctx, ns, u.GetName())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(after.DGD.Status.ObservedGeneration).To(Equal(after.DGD.Generation))
			}).Should(Succeed())
			Expect(after.DGD.Status.UpdateRevision).To(Equal(before[len(before)-1].DGD.Status.UpdateRevision))
			Expect(after.DGD.Status.UpdateRevisionNumber).To(Equal(int64(1)))
			Expect(after.Hashes()).To(Equal(before[len(before)-1].Hashes()), "the same workloads")
		})
	}
})
