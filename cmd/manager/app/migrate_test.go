package app

import (
	"context"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1beta1"
)

// migrationCRD is the DGD's CRD with storage version storage and status.storedVersions
// stored.
func migrationCRD(storage string, stored ...string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: CRDName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1alpha1", Served: true, Storage: storage == "v1alpha1"},
			{Name: "v1beta1", Served: true, Storage: storage == "v1beta1"}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
}

// storedAfterMigration runs the migration and returns the CRD's storedVersions.
func storedAfterMigration(t *testing.T, c client.Client) []string {
	t.Helper()
	if err := migrateStorage(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(context.Background(), client.ObjectKey{Name: CRDName}, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Status.StoredVersions
}

// TestMigrateStorageWhileTheCRDChanges: the CRD changes between the migration's read
// of it and its narrowing of storedVersions (during the list of DGDs). The narrowing
// is written over the CRD as first read, so it conflicts, and the migration starts
// over from the CRD as it now is:
//   - its storage version became v1alpha1 (an older CRD applied by a rollback): the
//     objects written since are stored in v1alpha1, so storedVersions keeps it;
//   - only its caBundle changed (a certificate rotation): the second migration narrows.
//
// The old migration read the CRD again just before narrowing and narrowed in both.
func TestMigrateStorageWhileTheCRDChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{"storage back to v1alpha1", func(c *apiextensionsv1.CustomResourceDefinition) {
			for i := range c.Spec.Versions {
				c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == "v1alpha1"
			}
		}, []string{"v1alpha1", "v1beta1"}},
		{"caBundle rotated", func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Conversion = ConversionConfig(WebhookOptions{URL: "https://127.0.0.1:9443"}, []byte("another CA"))
		}, []string{"v1beta1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dgd := &v1beta1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "g"}}
			lists := 0
			var c client.Client
			c = fake.NewClientBuilder().WithScheme(NewScheme()).
				WithObjects(migrationCRD("v1beta1", "v1alpha1", "v1beta1"), dgd).
				WithStatusSubresource(&apiextensionsv1.CustomResourceDefinition{}).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, w client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lists++
					if lists == 1 {
						var crd apiextensionsv1.CustomResourceDefinition
						if err := w.Get(ctx, client.ObjectKey{Name: CRDName}, &crd); err != nil {
							return err
						}
						tc.change(&crd)
						if err := w.Update(ctx, &crd); err != nil {
							return err
						}
					}
					return w.List(ctx, list, opts...)
				}}).Build()
			if got := storedAfterMigration(t, c); !slices.Equal(got, tc.want) {
				t.Errorf("storedVersions %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMigrateStorageNotToAnotherStorageVersion: with the CRD's storage version v1alpha1,
// objects are stored in v1alpha1: nothing is rewritten and storedVersions stays.
func TestMigrateStorageNotToAnotherStorageVersion(t *testing.T) {
	dgd := &v1beta1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "g"}}
	writes := 0
	c := fake.NewClientBuilder().WithScheme(NewScheme()).
		WithObjects(migrationCRD("v1alpha1", "v1beta1", "v1alpha1"), dgd).
		WithStatusSubresource(&apiextensionsv1.CustomResourceDefinition{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Update: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				writes++
				return w.Update(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, w client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes++
				return w.SubResource(sub).Update(ctx, obj, opts...)
			}}).Build()
	if got, want := storedAfterMigration(t, c), []string{"v1beta1", "v1alpha1"}; !slices.Equal(got, want) || writes != 0 {
		t.Errorf("storedVersions %v after %d writes, want %v after none", got, writes, want)
	}
}
