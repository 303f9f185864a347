package backends

import (
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

// Component is what render builds one (service, revision) of a DGD from: the service's
// template at that revision and the operator's platform configuration. Every backend
// renders its pods through it, so a Deployment's pod, an LWS leader and a Grove clique
// of one service never disagree.
func Component(dgd *v1alpha1.DynamoGraphDeployment, sw ServiceWorkload, cfg render.Config) render.Component {
	return render.Component{DGD: dgd, Name: sw.Service, Spec: sw.Spec, Hash: sw.Hash, Config: cfg}
}

// EffectiveNamespace is the Dynamo namespace a replica of (service, hash) registers in.
func EffectiveNamespace(dgd *v1alpha1.DynamoGraphDeployment, worker bool, hash string) string {
	return render.EffectiveNamespace(dgd, worker, hash)
}
