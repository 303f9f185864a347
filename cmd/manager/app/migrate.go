package app

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1beta1"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,resourceNames=dynamographdeployments.nvidia.com,verbs=get;update

// MigrateStorage rewrites every DynamoGraphDeployment stored in an older version (a
// cluster that ran Dynamo's operator or this one before v1beta1) in v1beta1, and then
// narrows the CRD's status.storedVersions to [v1beta1], as Dynamo's in-operator
// migrator does: a later CRD may then drop v1alpha1. Each object is read and written
// back unchanged as v1beta1 (the API server stores it in the storage version). The
// operator runs it once at start, as the leader; it does nothing when storedVersions
// is already [v1beta1], or when the CRD's storage version is not v1beta1 (a rollback
// applied an older CRD: objects are being stored in another version, which narrowing
// would unlist).
func MigrateStorage(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return err
	}
	return migrateStorage(ctx, c)
}

// migrateStorage is MigrateStorage with its client. The narrowing is written over the
// CRD as it was read before the objects were listed (its resourceVersion a
// precondition): when the CRD changed in between (its storage version may have, and
// objects rewritten since were then stored in another), the update conflicts and the
// migration starts over from the CRD.
func migrateStorage(ctx context.Context, c client.Client) error {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		err := migrateOnce(ctx, c)
		if !apierrors.IsConflict(err) {
			return err
		}
		if attempt == attempts {
			return fmt.Errorf("CRD %s changed during each of %d storage migrations: %w", CRDName, attempts, err)
		}
		ctrl.Log.Info("CRD changed during the storage migration; starting over", "crd", CRDName, "attempt", attempt)
	}
}

// migrateOnce is one migration from the CRD it reads; a conflict says the CRD changed
// before the narrowing.
func migrateOnce(ctx context.Context, c client.Client) error {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, &crd); err != nil {
		return fmt.Errorf("reading CRD %s: %w", CRDName, err)
	}
	stored, hub := crd.Status.StoredVersions, v1beta1.GroupVersion.Version
	if len(stored) == 1 && stored[0] == hub {
		return nil
	}
	if sv := storageVersion(&crd); sv != hub {
		ctrl.Log.Info("the CRD's storage version is not "+hub+": storage not migrated", "crd", CRDName, "storage", sv, "storedVersions", stored)
		return nil
	}
	var list v1beta1.DynamoGraphDeploymentList
	for {
		if err := c.List(ctx, &list, client.Continue(list.Continue), client.Limit(100)); err != nil {
			return fmt.Errorf("listing DynamoGraphDeployments: %w", err)
		}
		for i := range list.Items {
			if err := rewrite(ctx, c, &list.Items[i]); err != nil {
				return err
			}
		}
		if list.Continue == "" {
			break
		}
	}
	crd.Status.StoredVersions = []string{hub}
	if err := c.Status().Update(ctx, &crd); err != nil { // %w: migrateStorage sees a conflict
		return fmt.Errorf("narrowing the storedVersions of CRD %s: %w", CRDName, err)
	}
	ctrl.Log.Info("storage migrated to "+hub, "crd", CRDName, "was", stored)
	return nil
}

// storageVersion is the name of the CRD's storage version.
func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// rewrite writes d back unchanged (re-read on a conflict; gone is done).
func rewrite(ctx context.Context, c client.Client, d *v1beta1.DynamoGraphDeployment) error {
	for attempt := 0; ; attempt++ {
		err := c.Update(ctx, d)
		if apierrors.IsNotFound(err) || err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return fmt.Errorf("rewriting DynamoGraphDeployment %s/%s in v1beta1: %w", d.Namespace, d.Name, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
}

// migrator runs MigrateStorage once as the leader, retrying until it succeeds, and
// then calls done (when set).
type migrator struct {
	cfg  *rest.Config
	done func()
}

func (m migrator) Start(ctx context.Context) error {
	for {
		err := MigrateStorage(ctx, m.cfg)
		if err == nil {
			if m.done != nil {
				m.done()
			}
			return nil
		}
		ctrl.Log.Error(err, "storage migration to v1beta1 (retrying in a minute)")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Minute):
		}
	}
}
