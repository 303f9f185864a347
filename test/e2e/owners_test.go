package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/test/harness"
)

// Issue 38 §2: an older operator wrote owner references to nvidia.com/v1alpha1, which
// Dynamo deprecates. The garbage collector resolves an owner through its reference's
// version (kubernetes pkg/controller/garbagecollector/garbagecollector.go, isDangling:
// gc.apiResource(reference.APIVersion, reference.Kind); a restMappingError is retried
// forever), so once v1alpha1 is no longer served an object owned through such a reference
// outlives its DGD. The upgraded operator moves them to v1beta1 at start
// (backends.RelabelOwnedExcept), with no rollout.
var _ = Describe("owner references of an older operator (nvidia.com/v1alpha1)", func() {
	It("move to v1beta1 at the upgraded operator's start with no rollout, and with v1alpha1 unserved the garbage collector deletes every object of the DGD", func() {
		ns := newNamespace()
		Expect(k8s.Create(ctx, harness.NewDGD(ns, "owners").Disagg(1, 1, "vllm:v1").Obj())).To(Succeed())
		var dgd v1alpha1.DynamoGraphDeployment
		podsOf := func() []corev1.Pod {
			var list corev1.PodList
			Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: "owners"})).To(Succeed())
			return list.Items
		}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "owners"}, &dgd)).To(Succeed())
			g.Expect(RolledOut(&dgd, podsOf())).To(BeTrue(), Summary(&dgd))
		}, RolloutTimeout, 100*time.Millisecond).Should(Succeed())
		owned := ownedObjects(ns, dgd.UID)
		Expect(kindsOf(owned)).To(ContainElements("Deployment", "Service", "ControllerRevision"))

		By("the older operator's references: every object the DGD owns names nvidia.com/v1alpha1")
		stopOp()
		stopOp = func() {}
		restarted := false
		DeferCleanup(func() {
			if !restarted { // the spec failed with no operator: the next specs need one
				stopOp = runOperator(nil)
			}
		})
		for _, o := range owned {
			setOwnerVersion(o, dgd.UID, "nvidia.com/v1alpha1")
		}
		// What the operator cannot move: a Secret it made (the TRT-LLM gangs' SSH key); it
		// may create Secrets and read none (docs/reference.md, "Owner references").
		key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owners-ssh-key",
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelGraph: "owners"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment",
				Name: "owners", UID: dgd.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}}}
		Expect(k8s.Create(ctx, key)).To(Succeed())
		generations := deploymentGenerations(ns)
		podUIDs := uidsOf(podsOf())

		By("the upgraded operator starts: every reference it can read moves to v1beta1")
		stopOp, restarted = runOperator(nil), true
		Eventually(func(g Gomega) {
			for _, o := range ownedObjects(ns, dgd.UID) {
				if o.Kind == "Secret" {
					continue
				}
				g.Expect(ownerVersions(o, dgd.UID)).To(Equal([]string{"nvidia.com/v1beta1"}), "%s %s", o.Kind, o.Name)
			}
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
		Expect(deploymentGenerations(ns)).To(Equal(generations), "no Deployment rolled")
		Expect(uidsOf(podsOf())).To(Equal(podUIDs), "no pod replaced")

		By("v1alpha1 no longer served, and the garbage collector knows it")
		served := func(on bool) {
			var crd apiextensionsv1.CustomResourceDefinition
			Eventually(func() error {
				if err := k8s.Get(ctx, client.ObjectKey{Name: "dynamographdeployments.nvidia.com"}, &crd); err != nil {
					return err
				}
				for i := range crd.Spec.Versions {
					if crd.Spec.Versions[i].Name == "v1alpha1" {
						crd.Spec.Versions[i].Served = on
					}
				}
				return k8s.Update(ctx, &crd)
			}).Should(Succeed())
			Eventually(func() bool { return servesDGDs("nvidia.com/v1alpha1") }, time.Minute, 100*time.Millisecond).Should(Equal(on))
		}
		served(false)
		DeferCleanup(func() {
			served(true)
			Eventually(func() error { return k8s.List(ctx, &v1alpha1.DynamoGraphDeploymentList{}) },
				time.Minute, 100*time.Millisecond).Should(Succeed(), "v1alpha1 served again, for the specs after this one")
		})
		waitGarbageCollectorResynced(ns)
		Expect(deploymentGenerations(ns)).To(Equal(generations), "no Deployment rolled")

		By("the DGD deleted: the garbage collector deletes every object it owned through v1beta1")
		beta := &v1beta1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owners"}}
		Expect(k8s.Delete(ctx, beta)).To(Succeed())
		Eventually(func() []string {
			var left []string
			for _, o := range ownedObjects(ns, dgd.UID) {
				left = append(left, o.Kind+" "+o.Name)
			}
			return left
		}, 2*time.Minute, 200*time.Millisecond).Should(Equal([]string{"Secret owners-ssh-key"}))
		Eventually(podsOf, time.Minute, 100*time.Millisecond).Should(BeEmpty())
		// The Secret through v1alpha1 outlives the DGD (the garbage collector's
		// restMappingError): the reason the operator moves every other reference.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(key), key)).To(Succeed())
		Expect(k8s.Delete(ctx, key)).To(Succeed())
	})
})

// ownedObjects is every object of every namespaced kind the API server serves (as
// discovery prefers it) in ns with an owner reference to uid, metadata only.
func ownedObjects(ns string, uid types.UID) []metav1.PartialObjectMetadata {
	lists, err := discoveryFor().ServerPreferredNamespacedResources()
	Expect(err).NotTo(HaveOccurred())
	meta, err := metadata.NewForConfig(cl.Config)
	Expect(err).NotTo(HaveOccurred())
	var out []metav1.PartialObjectMetadata
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "events" {
				continue
			}
			items, err := meta.Resource(gv.WithResource(r.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred(), r.Name)
			for _, o := range items.Items {
				for _, ref := range o.OwnerReferences {
					if ref.UID == uid {
						o.APIVersion, o.Kind = gv.String(), r.Kind
						out = append(out, o)
						break
					}
				}
			}
		}
	}
	return out
}

func kindsOf(objs []metav1.PartialObjectMetadata) []string {
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Kind)
	}
	return kinds
}

// ownerVersions are the API versions of o's references to uid.
func ownerVersions(o metav1.PartialObjectMetadata, uid types.UID) []string {
	var out []string
	for _, r := range o.OwnerReferences {
		if r.UID == uid {
			out = append(out, r.APIVersion)
		}
	}
	return out
}

// setOwnerVersion rewrites o's references to uid to apiVersion (a merge patch of its
// owner references, as the admin).
func setOwnerVersion(o metav1.PartialObjectMetadata, uid types.UID, apiVersion string) {
	refs := slices.Clone(o.OwnerReferences)
	for i := range refs {
		if refs[i].UID == uid {
			refs[i].APIVersion = apiVersion
		}
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Patch(ctx, &o, client.RawPatch(types.MergePatchType, data))).To(Succeed(), "%s %s", o.Kind, o.Name)
}

func deploymentGenerations(ns string) map[string]int64 {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"})
	Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	out := map[string]int64{}
	for _, d := range list.Items {
		out[d.Name] = d.Generation
	}
	return out
}

func uidsOf(pods []corev1.Pod) []types.UID {
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	slices.Sort(out)
	return out
}

// servesDGDs reports whether discovery lists DGDs under groupVersion.
func servesDGDs(groupVersion string) bool {
	l, err := discoveryFor().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == "dynamographdeployments" })
}

// waitGarbageCollectorResynced waits until kube-controller-manager's garbage collector
// has read discovery since now. It resets its REST mapper only when discovery changes,
// every 30 s (cmd/kube-controller-manager/app/core.go: syncPeriod; garbagecollector.go
// Sync), so a CRD served only from now on is a marker: a ConfigMap owned by an object of
// it that does not exist is deleted once the collector maps the kind (until then its
// lookup is a restMappingError, retried). Any such read of discovery is after the
// caller's change (here: v1alpha1 no longer served).
func waitGarbageCollectorResynced(ns string) {
	group := "gcprobe" + strings.ToLower(string(uuid.NewUUID())[:8]) + ".e2e.test"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "probes." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "probes", Singular: "probe", Kind: "Probe", ListKind: "ProbeList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true)}}}},
		},
	}
	Expect(k8s.Create(ctx, crd)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, crd))).To(Succeed()) })
	Eventually(func() bool {
		l, err := discoveryFor().ServerResourcesForGroupVersion(group + "/v1")
		return err == nil && len(l.APIResources) > 0
	}, time.Minute, 100*time.Millisecond).Should(BeTrue())
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-resync-marker",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: group + "/v1", Kind: "Probe", Name: "absent", UID: uuid.NewUUID()}}}}
	Expect(k8s.Create(ctx, marker)).To(Succeed())
	start := time.Now()
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(marker), &corev1.ConfigMap{}))
	}, 3*time.Minute, 200*time.Millisecond).Should(BeTrue(), "the garbage collector deletes the marker once it maps the new kind")
	GinkgoWriter.Printf("garbage collector resynced discovery after %s\n", time.Since(start).Round(time.Second))
}

func discoveryFor() *discovery.DiscoveryClient {
	disc, err := discovery.NewDiscoveryClientForConfig(cl.Config)
	Expect(err).NotTo(HaveOccurred())
	return disc
}
