package validation_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var _ = Describe("immutable fields", func() {
	It("rejects changing spec.backend on a live DGD, naming the field", func() {
		u := parse([]byte(valid))
		u.SetNamespace(newNamespace())
		Expect(env.Client.Create(ctx, u)).To(Succeed())
		Expect(unstructured.SetNestedField(u.Object, "Grove", "spec", "backend")).To(Succeed())
		err := env.Client.Update(ctx, u)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.backend"))
		Expect(err.Error()).To(ContainSubstring("immutable"))
	})
})
