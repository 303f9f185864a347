package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/revisions"
)

func newHistoryCommand(c *cli) *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:   "history NAME [--revision=N]",
		Short: "View the revisions of a DynamoGraphDeployment",
		Long: "List the revisions of a DynamoGraphDeployment with their change cause (the\n" +
			"kubernetes.io/change-cause annotation of the DGD's change), or, with --revision,\n" +
			"print the services that revision recorded. A revision records the whole graph;\n" +
			"one that changed only stable services (frontend, planner...) rolled no worker.\n" +
			"It prints in the API version the DGD was last written in (spec.components for\n" +
			"nvidia.com/v1beta1, spec.services for v1alpha1), read from its managedFields.",
		Example: "  kubectl dgd rollout history vllm-disagg\n" +
			"  kubectl dgd rollout history vllm-disagg --revision=2",
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.connect()
			if err != nil {
				return err
			}
			return runHistory(cmd.Context(), s, c.streams.Out, args[0], revision)
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "See the services of this revision")
	return cmd
}

// runHistory prints the history of name, or the services of one revision.
func runHistory(ctx context.Context, s *session, out io.Writer, name string, revision int64) error {
	dgd, revs, err := s.history(ctx, name)
	if err != nil {
		return err
	}
	if revision != 0 {
		rev := revisions.FindRevision(revs, revision)
		if rev == nil {
			return revisionNotFound(revision)
		}
		text, err := templatesYAML(rev, writtenVersion(dgd))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s with revision #%d\n%s", ref(name), revision, text)
		return err
	}
	fmt.Fprintln(out, ref(name))
	if len(revs) == 0 {
		_, err := fmt.Fprintln(out, "No rollout history found.")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tCHANGE-CAUSE")
	for _, rev := range revs {
		cause := rev.Annotations[v1alpha1.AnnotationChangeCause]
		if cause == "" {
			cause = "<none>"
		}
		fmt.Fprintf(tw, "%d\t%s\n", rev.Revision, cause)
	}
	return tw.Flush()
}

// writtenVersion is the API version the DGD's spec was last written in by its user: that
// of the newest managedFields entry that owns spec fields, leaving out status writes
// and this plugin's own (it writes v1beta1 whatever the user's manifests are). A
// revision prints in it, so a graph applied as v1beta1 shows components and one applied
// as v1alpha1 services. With no such entry, v1beta1: the preferred version, what
// kubectl get prints.
func writtenVersion(dgd metav1.Object) string {
	version, newest := v1beta1.GroupVersion.Version, time.Time{}
	for _, e := range dgd.GetManagedFields() {
		if e.Subresource != "" || e.Manager == PluginFieldManager || e.FieldsV1 == nil ||
			!bytes.Contains(e.FieldsV1.Raw, []byte(`"f:spec"`)) {
			continue
		}
		gv, err := schema.ParseGroupVersion(e.APIVersion)
		if err != nil || gv.Group != v1beta1.GroupVersion.Group {
			continue
		}
		if t := timeOf(e); !t.Before(newest) {
			version, newest = gv.Version, t
		}
	}
	return version
}

// timeOf is when a managedFields entry was last written (zero when not recorded).
func timeOf(e metav1.ManagedFieldsEntry) time.Time {
	if e.Time == nil {
		return time.Time{}
	}
	return e.Time.Time
}

// templatesYAML renders the services rev records as YAML shaped like a partial DGD spec
// in version (v1alpha1: services, and envs and backend when set; v1beta1: components,
// env, backend). Replicas are left out: they are not part of a template, and an undo
// keeps the current ones.
func templatesYAML(rev *appsv1.ControllerRevision, version string) (string, error) {
	data, err := revisions.DecodeRevisionData(rev)
	if err != nil {
		return "", err
	}
	for _, svc := range data.Services { // data is decoded afresh: its own to change
		if svc != nil {
			svc.Replicas = nil
		}
	}
	if version == v1beta1.GroupVersion.Version {
		return betaTemplatesYAML(rev.Revision, data)
	}
	tree, err := toTree(data)
	if err != nil {
		return "", fmt.Errorf("printing revision %d: %w", rev.Revision, err)
	}
	delete(tree, "wholeGraph")    // how the data is stored, not what the graph was
	delete(tree, "renderVersion") // the operator's rendering generation, not something a user wrote
	services, _ := tree["services"].(map[string]any)
	for _, svc := range services {
		pruneMainContainer(svc)
	}
	text, err := yaml.Marshal(tree)
	if err != nil {
		return "", fmt.Errorf("printing revision %d: %w", rev.Revision, err)
	}
	return string(text), nil
}

// pruneMainContainer drops the fields Go always serializes and a user never wrote: the
// pod spec's "containers: null" in extraPodSpec (its PodSpec is inline and containers
// has no omitempty), and the main container's empty name and empty resources.
func pruneMainContainer(svc any) {
	spec, _ := svc.(map[string]any)
	eps, _ := spec["extraPodSpec"].(map[string]any)
	if c, ok := eps["containers"]; ok && c == nil {
		delete(eps, "containers")
	}
	mc, _ := eps["mainContainer"].(map[string]any)
	if mc == nil {
		return
	}
	if name, ok := mc["name"].(string); ok && name == "" {
		delete(mc, "name")
	}
	if res, ok := mc["resources"].(map[string]any); ok && len(res) == 0 {
		delete(mc, "resources")
	}
}

// betaTemplatesYAML renders data (its replicas left out) as v1beta1 shows the graph: the services converted
// into spec.components as the API server's /convert does (package conversion), and
// env, backend and backendFramework. What v1beta1 cannot hold of a service written in
// v1alpha1 (dynamoNamespace...) is not shown: kubectl get shows it only in the
// nvidia.com/dgd-spec annotation, which is not part of a revision's print.
func betaTemplatesYAML(revision int64, data *revisions.RevisionData) (string, error) {
	alpha := &v1alpha1.DynamoGraphDeployment{Spec: v1alpha1.DynamoGraphDeploymentSpec{
		Services: data.Services, Envs: data.Envs, Backend: data.Backend, BackendFramework: data.BackendFramework}}
	var beta v1beta1.DynamoGraphDeployment
	if err := conversion.ToHub(alpha, &beta); err != nil {
		return "", fmt.Errorf("printing revision %d in %s: %w", revision, v1beta1.GroupVersion, err)
	}
	tree, err := toTree(beta.Spec)
	if err != nil {
		return "", fmt.Errorf("printing revision %d: %w", revision, err)
	}
	components, _ := tree["components"].([]any)
	for _, c := range components {
		prunePodTemplate(c)
	}
	text, err := yaml.Marshal(tree)
	if err != nil {
		return "", fmt.Errorf("printing revision %d: %w", revision, err)
	}
	return string(text), nil
}

// toTree is v as JSON's generic tree.
func toTree(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var tree map[string]any
	return tree, json.Unmarshal(raw, &tree)
}

// prunePodTemplate drops what Go always serializes in a component's pod template and a
// user never wrote: "metadata: {creationTimestamp: null}", and each container's empty
// resources.
func prunePodTemplate(component any) {
	c, _ := component.(map[string]any)
	pt, _ := c["podTemplate"].(map[string]any)
	if pt == nil {
		return
	}
	if md, ok := pt["metadata"].(map[string]any); ok {
		if ts, ok := md["creationTimestamp"]; ok && ts == nil {
			delete(md, "creationTimestamp")
		}
		if len(md) == 0 {
			delete(pt, "metadata")
		}
	}
	spec, _ := pt["spec"].(map[string]any)
	containers, _ := spec["containers"].([]any)
	for _, ct := range containers {
		if m, ok := ct.(map[string]any); ok {
			if res, ok := m["resources"].(map[string]any); ok && len(res) == 0 {
				delete(m, "resources")
			}
		}
	}
}

// revisionNotFound is kubectl's error for a revision number not in history.
func revisionNotFound(revision int64) error {
	return fmt.Errorf("unable to find specified revision %d in history", revision)
}
