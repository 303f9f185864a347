package plugin_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
)

// kubectl expands a category before it reads a short name (cli-runtime v0.36.2,
// pkg/resource/builder.go, Builder.ReplaceAliases, which kubectl get, annotate, patch and
// the rest call on their type argument). The AnalysisTemplate CRDs once had the category
// "dgd": "kubectl get dgd" then listed analysis templates and no DGD, and "kubectl
// annotate dgd <name>" failed with "you must specify only one resource".
var _ = Describe("kubectl's names for the installed CRDs", func() {
	It("each resolve to their own resource, as kubectl's resource builder reads a type argument", func() {
		ns := newNamespace()
		Expect(env.Client.Create(ctx, harness.NewDGD(ns, "names").Disagg(1, 1, "vllm:v1").Obj())).To(Succeed())
		flags := genericclioptions.NewConfigFlags(false)
		flags.KubeConfig = &kubeconfig
		cacheDir := GinkgoT().TempDir()
		flags.CacheDir = &cacheDir

		crds, err := cluster.ReadCRDs(harness.CRDPaths()...)
		Expect(err).NotTo(HaveOccurred())
		Expect(crds).To(ContainElement(HaveField("Spec.Names.ShortNames", ContainElement("dgd"))))
		for _, crd := range crds {
			n := crd.Spec.Names
			for _, name := range append([]string{n.Plural, n.Singular}, n.ShortNames...) {
				mapping, err := resource.NewBuilder(flags).Unstructured().
					NamespaceParam(ns).DefaultNamespace().
					ResourceTypeOrNameArgs(true, name).Do().ResourceMapping()
				Expect(err).NotTo(HaveOccurred(), "kubectl get %s", name)
				Expect(mapping.Resource.GroupResource().String()).To(Equal(crd.Name), "kubectl get %s", name)
			}
		}

		// What the README's first commands do: get the DGD by its short name, and name it.
		infos, err := resource.NewBuilder(flags).Unstructured().
			NamespaceParam(ns).DefaultNamespace().
			ResourceTypeOrNameArgs(true, "dgd", "names").Do().Infos()
		Expect(err).NotTo(HaveOccurred(), "kubectl annotate dgd names")
		Expect(infos).To(HaveLen(1))
		Expect(infos[0].Mapping.Resource.Resource).To(Equal("dynamographdeployments"))
	})
})
