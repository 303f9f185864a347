package controllers

import (
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

// specChecks remembers render.Validate's verdict on each DGD's spec, so a pass renders
// every component's pods to check them only when what they are rendered from changed:
// the spec (its generation: the API server bumps it on every spec change, and the DGD's
// status is a subresource), the restart id its pods carry (revisions.WithRestart), and
// the DGD's own labels and annotations (render reads some of them; the discovery backend
// annotation among them). The platform is the reconciler's, fixed for its life. A
// verdict is kept per DGD (the latest only), under its name, for its UID.
type specChecks struct {
	mu sync.Mutex
	m  map[types.NamespacedName]specCheck
}

type specCheck struct {
	uid         types.UID
	generation  int64
	restart     string
	labels      map[string]string
	annotations map[string]string
	err         error
}

func (c *specChecks) matches(k specCheck, dgd *v1alpha1.DynamoGraphDeployment) bool {
	return k.uid == dgd.UID && k.generation == dgd.Generation && k.restart == dgd.RestartID() &&
		maps.Equal(k.labels, dgd.Labels) && maps.Equal(k.annotations, dgd.Annotations)
}

// validate is render.Validate(dgd, cfg), remembered as above. A DGD without a UID or
// generation (never stored by an API server) is checked every time.
func (c *specChecks) validate(dgd *v1alpha1.DynamoGraphDeployment, cfg render.Config) error {
	if dgd.UID == "" || dgd.Generation == 0 {
		return render.Validate(dgd, cfg)
	}
	name := types.NamespacedName{Namespace: dgd.Namespace, Name: dgd.Name}
	c.mu.Lock()
	k, ok := c.m[name]
	c.mu.Unlock()
	if ok && c.matches(k, dgd) {
		return k.err
	}
	err := render.Validate(dgd, cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]specCheck{}
	}
	c.m[name] = specCheck{uid: dgd.UID, generation: dgd.Generation, restart: dgd.RestartID(),
		labels: maps.Clone(dgd.Labels), annotations: maps.Clone(dgd.Annotations), err: err}
	return err
}

// forget drops a DGD's verdict (the DGD is gone).
func (c *specChecks) forget(name types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}
