package render

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Validate renders every service of a DGD in every role it has and reports, naming the
// service and field, what the CRD cannot check: a missing image, resources that are not
// quantities, a runtimeVersionOverride that is not a version, an executor annotation
// other than mp or ray, a multinode worker without the command and args its gang's
// flags go into, a command naming another framework than backendFramework, and worker
// services running different frameworks (Dynamo's determineBackendFramework).
func Validate(dgd *v1alpha1.DynamoGraphDeployment, cfg Config) error {
	if v := dgd.Annotations[AnnotationDiscoveryBackend]; v != "" && v != DiscoveryKubernetes && v != DiscoveryEtcd {
		return fmt.Errorf("metadata.annotations[%s]: %q must be %s", AnnotationDiscoveryBackend, v, discoveryBackendValuesForErrorString)
	}
	frameworks := map[string][]string{}
	for _, name := range dgd.ServiceNames() {
		svc := dgd.Spec.Services[name]
		c := Component{DGD: dgd, Name: name, Spec: svc, Hash: "00000000", Config: cfg}
		if _, err := c.Pod(RoleMain, nil); err != nil {
			return err
		}
		if c.kind() != kindWorker {
			continue
		}
		if _, err := c.Executor(); err != nil {
			return fmt.Errorf("spec.services[%s]: %w", name, err)
		}
		main := svc.ExtraPodSpec.MainContainer
		f, err := DetectFramework(main, dgd.Spec.BackendFramework)
		if err != nil {
			return fmt.Errorf("spec.services[%s].extraPodSpec.mainContainer: %w", name, err)
		}
		if f != "" {
			frameworks[f] = append(frameworks[f], name)
		}
		if !svc.IsMultinode() {
			continue
		}
		if len(main.Command) == 0 || len(main.Args) == 0 {
			return fmt.Errorf("spec.services[%s].extraPodSpec.mainContainer: a multinode worker needs command and args (its gang's leader address and rank are added to them)", name)
		}
		for _, gang := range []Gang{LWS{}, Grove{PCS: "pcs", Group: "group", Namespace: dgd.Namespace}} {
			for _, role := range []Role{RoleLeader, RoleWorker} {
				if _, err := c.Pod(role, gang); err != nil {
					return err
				}
			}
		}
	}
	if len(frameworks) > 1 {
		var parts []string
		for f, names := range frameworks {
			parts = append(parts, fmt.Sprintf("%s (%s)", f, strings.Join(names, ", ")))
		}
		sort.Strings(parts)
		return fmt.Errorf("spec.services: worker services run different frameworks: %s; a graph's workers must share one", strings.Join(parts, " and "))
	}
	return nil
}
