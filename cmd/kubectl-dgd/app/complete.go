package app

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// completionTimeout bounds the API calls of a shell completion: a slow or unreachable
// cluster must not hang the user's shell.
const completionTimeout = 5 * time.Second

// completeName completes the first argument with the names of the DGDs in the namespace
// (-n, else the kubeconfig context's), as kubectl completes resource names. Nothing is
// offered when the cluster cannot be reached.
func (c *cli) completeName(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []cobra.Completion
	c.withDGDs(cmd, func(dgds []v1alpha1.DynamoGraphDeployment) {
		for _, d := range dgds {
			if strings.HasPrefix(d.Name, toComplete) {
				names = append(names, d.Name)
			}
		}
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeSetImage completes "set image": the DGD name, then "SERVICE=" for each of its
// services not given yet (no space after it: the image follows).
func (c *cli) completeSetImage(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return c.completeName(cmd, args, toComplete)
	}
	given := map[string]bool{}
	for _, arg := range args[1:] {
		service, _, _ := strings.Cut(arg, "=")
		given[service] = true
	}
	var out []cobra.Completion
	c.withDGDs(cmd, func(dgds []v1alpha1.DynamoGraphDeployment) {
		for _, d := range dgds {
			if d.Name != args[0] {
				continue
			}
			for _, name := range d.ServiceNames() {
				if !given[name] && strings.HasPrefix(name+"=", toComplete) {
					out = append(out, name+"=")
				}
			}
		}
	})
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// withDGDs lists the DGDs of the namespace and passes them to f; on any error it does
// not call f.
func (c *cli) withDGDs(cmd *cobra.Command, f func([]v1alpha1.DynamoGraphDeployment)) {
	c.withSession(cmd, func(ctx context.Context, s *session) {
		var list v1alpha1.DynamoGraphDeploymentList
		if s.client.List(ctx, &list, client.InNamespace(s.namespace)) == nil {
			f(list.Items)
		}
	})
}

// completeTemplate completes the template name of "analysis run": the AnalysisTemplates
// of the namespace, or with --cluster-scope (given before it) the
// ClusterAnalysisTemplates.
func (c *cli) completeTemplate(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cluster, _ := cmd.Flags().GetBool("cluster-scope")
	var names []cobra.Completion
	add := func(name string) {
		if strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	c.withSession(cmd, func(ctx context.Context, s *session) {
		if cluster {
			var list v1alpha1.ClusterAnalysisTemplateList
			if s.client.List(ctx, &list) == nil {
				for _, t := range list.Items {
					add(t.Name)
				}
			}
			return
		}
		var list v1alpha1.AnalysisTemplateList
		if s.client.List(ctx, &list, client.InNamespace(s.namespace)) == nil {
			for _, t := range list.Items {
				add(t.Name)
			}
		}
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}

// withSession connects and passes the session to f with a context bounded by
// completionTimeout; when the cluster cannot be reached it does not call f.
func (c *cli) withSession(cmd *cobra.Command, f func(context.Context, *session)) {
	s, err := c.connect()
	if err != nil {
		return
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	f(ctx, s)
}
