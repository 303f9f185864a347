package harness

import (
	"fmt"
	"slices"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
)

// GroveRejects lists what Grove's validating webhook for PodCliqueSets rejects in a
// create (old nil) or an update from old to cur, written from its source at tag
// operator/v0.1.0-alpha.12-rc1 (operator/internal/webhook/admission/pcs/validation:
// handler.go ValidateCreate / ValidateUpdate, podcliqueset.go). Both run validate()
// on the new object; a create also rejects a pod spec with topologySpreadConstraints
// or nodeName (validatePodSpec); an update also the changes validateUpdate forbids.
// Grove's defaulting webhook runs first; the operator sets every field it would
// default (minAvailable, terminationDelay, startup type), so they are checked as set.
// Not modelled: topology constraints, resource claims and sharing, MNNVL annotations,
// the scheduler backend's own checks (none of them is ever set by the operator).
func GroveRejects(old, cur *grovev1.PodCliqueSet) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	t := cur.Spec.Template
	if cur.Spec.Replicas < 0 {
		bad("spec.replicas %d is negative", cur.Spec.Replicas)
	}
	switch {
	case t.StartupType == nil:
		bad("spec.template.cliqueStartupType is required")
	case !slices.Contains([]grovev1.CliqueStartupType{grovev1.CliqueStartupTypeInOrder, grovev1.CliqueStartupTypeAnyOrder, grovev1.CliqueStartupTypeExplicit}, *t.StartupType):
		bad("spec.template.cliqueStartupType %q is not InOrder, AnyOrder or Explicit", *t.StartupType)
	}
	explicit := t.StartupType != nil && *t.StartupType == grovev1.CliqueStartupTypeExplicit
	inGroup := map[string]string{}
	for _, g := range t.PodCliqueScalingGroupConfigs {
		for _, c := range g.CliqueNames {
			inGroup[c] = g.Name
		}
	}
	if len(t.Cliques) == 0 {
		bad("spec.template.cliques: at least one PodClique must be defined")
	}
	var names, roles []string
	for _, c := range t.Cliques {
		names, roles = append(names, c.Name), append(roles, c.Spec.RoleName)
		if errs := validation.IsDNS1123Subdomain(c.Name); c.Name == "" || len(errs) > 0 {
			bad("clique name %q is not a DNS subdomain", c.Name)
		}
		if _, grouped := inGroup[c.Name]; !grouped && len(cur.Name)+len(c.Name) > maxGroveNameLength {
			bad("clique %s: PodCliqueSet %s and clique names are %d characters, over %d", c.Name, cur.Name, len(cur.Name)+len(c.Name), maxGroveNameLength)
		}
		if c.Spec.Replicas <= 0 {
			bad("clique %s: replicas %d must be greater than 0", c.Name, c.Spec.Replicas)
		}
		switch m := c.Spec.MinAvailable; {
		case m == nil:
			bad("clique %s: minAvailable is required", c.Name)
		case *m <= 0 || *m > c.Spec.Replicas:
			bad("clique %s: minAvailable %d must be in 1..replicas %d", c.Name, *m, c.Spec.Replicas)
		}
		if explicit {
			for _, dep := range c.Spec.StartsAfter {
				if dep == "" || dep == c.Name || !slices.ContainsFunc(t.Cliques, func(o *grovev1.PodCliqueTemplateSpec) bool { return o.Name == dep }) {
					bad("clique %s: startsAfter %q is empty, itself or no clique", c.Name, dep)
				}
			}
			if dup := duplicates(c.Spec.StartsAfter); len(dup) > 0 {
				bad("clique %s: startsAfter lists %v twice", c.Name, dup)
			}
		}
		if c.Spec.ScaleConfig != nil && inGroup[c.Name] != "" {
			bad("clique %s of scaling group %s has its own autoscaling config", c.Name, inGroup[c.Name])
		}
		spec := c.Spec.PodSpec
		if old == nil && (spec.TopologySpreadConstraints != nil || spec.NodeName != "") {
			bad("clique %s: a created pod spec must not set topologySpreadConstraints or nodeName", c.Name)
		}
		for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
			for _, ctr := range cs {
				var env []string
				for _, e := range ctr.Env {
					env = append(env, e.Name)
					if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
						bad("clique %s container %s: env name %q: %v", c.Name, ctr.Name, e.Name, errs)
					}
				}
				if dup := duplicates(env); len(dup) > 0 {
					bad("clique %s container %s: env %v set twice", c.Name, ctr.Name, dup)
				}
			}
		}
	}
	if dup := duplicates(names); len(dup) > 0 {
		bad("clique names %v are not unique", dup)
	}
	if dup := duplicates(roles); len(dup) > 0 {
		bad("clique roleNames %v are not unique", dup)
	}
	var groups, grouped []string
	for _, g := range t.PodCliqueScalingGroupConfigs {
		groups, grouped = append(groups, g.Name), append(grouped, g.CliqueNames...)
		if errs := validation.IsDNS1123Subdomain(g.Name); len(errs) > 0 {
			bad("scaling group name %q is not a DNS subdomain", g.Name)
		}
		for _, c := range g.CliqueNames {
			if !slices.Contains(names, c) {
				bad("scaling group %s: clique %s is not defined", g.Name, c)
			}
			if n := len(cur.Name) + len(g.Name) + len(c); n > maxGroveNameLength {
				bad("scaling group %s clique %s: names are %d characters, over %d", g.Name, c, n, maxGroveNameLength)
			}
		}
		if g.Replicas != nil && *g.Replicas <= 0 {
			bad("scaling group %s: replicas %d must be greater than 0", g.Name, *g.Replicas)
		}
		if g.MinAvailable != nil && (*g.MinAvailable <= 0 || g.Replicas != nil && *g.MinAvailable > *g.Replicas) {
			bad("scaling group %s: minAvailable %d must be in 1..replicas", g.Name, *g.MinAvailable)
		}
	}
	if dup := duplicates(groups); len(dup) > 0 {
		bad("scaling group names %v are not unique", dup)
	}
	if dup := duplicates(grouped); len(dup) > 0 {
		bad("cliques %v belong to two scaling groups", dup)
	}
	if d := t.TerminationDelay; d == nil || d.Duration <= 0 {
		bad("spec.template.terminationDelay must be set and greater than 0")
	}
	if old != nil {
		out = append(out, groveUpdateRejects(old, cur)...)
	}
	return out
}

// maxGroveNameLength is Grove's limit on the names a pod is named after
// (podcliqueset.go maxCombinedResourceNameLength).
const maxGroveNameLength = 45

// groveUpdateRejects is validateUpdate: no clique or scaling group added or removed, and
// a clique's roleName, minAvailable, startsAfter and schedulerName, a scaling group's
// cliqueNames and minAvailable, and the startup type never change; under InOrder or
// Explicit startup the cliques keep their order.
func groveUpdateRejects(old, cur *grovev1.PodCliqueSet) []string {
	var out []string
	o, n := old.Spec.Template, cur.Spec.Template
	if len(o.Cliques) != len(n.Cliques) {
		out = append(out, fmt.Sprintf("%s: not allowed to change clique composition (%d cliques -> %d)", cur.Name, len(o.Cliques), len(n.Cliques)))
	}
	ordered := n.StartupType != nil && (*n.StartupType == grovev1.CliqueStartupTypeInOrder || *n.StartupType == grovev1.CliqueStartupTypeExplicit)
	for i, nc := range n.Cliques {
		j := slices.IndexFunc(o.Cliques, func(c *grovev1.PodCliqueTemplateSpec) bool { return c.Name == nc.Name })
		if j < 0 {
			out = append(out, fmt.Sprintf("%s: not allowed to change clique composition (new clique %s)", cur.Name, nc.Name))
			continue
		}
		oc := o.Cliques[j]
		if ordered && i != j {
			out = append(out, fmt.Sprintf("%s: clique %s moved from position %d to %d", cur.Name, nc.Name, j, i))
		}
		if oc.Spec.RoleName != nc.Spec.RoleName || !equality.Semantic.DeepEqual(oc.Spec.MinAvailable, nc.Spec.MinAvailable) ||
			!slices.Equal(oc.Spec.StartsAfter, nc.Spec.StartsAfter) || oc.Spec.PodSpec.SchedulerName != nc.Spec.PodSpec.SchedulerName {
			out = append(out, fmt.Sprintf("%s: immutable field of clique %s changed", cur.Name, nc.Name))
		}
	}
	if !equality.Semantic.DeepEqual(o.StartupType, n.StartupType) {
		out = append(out, fmt.Sprintf("%s: cliqueStartupType changed", cur.Name))
	}
	if len(o.PodCliqueScalingGroupConfigs) != len(n.PodCliqueScalingGroupConfigs) {
		out = append(out, fmt.Sprintf("%s: not allowed to add or remove PodCliqueScalingGroupConfigs", cur.Name))
	}
	for _, ng := range n.PodCliqueScalingGroupConfigs {
		j := slices.IndexFunc(o.PodCliqueScalingGroupConfigs, func(g grovev1.PodCliqueScalingGroupConfig) bool { return g.Name == ng.Name })
		if j < 0 {
			out = append(out, fmt.Sprintf("%s: not allowed to change scaling group composition (new group %s)", cur.Name, ng.Name))
			continue
		}
		og := o.PodCliqueScalingGroupConfigs[j]
		if !slices.Equal(og.CliqueNames, ng.CliqueNames) || !equality.Semantic.DeepEqual(og.MinAvailable, ng.MinAvailable) {
			out = append(out, fmt.Sprintf("%s: immutable field of scaling group %s changed", cur.Name, ng.Name))
		}
	}
	return out
}

// duplicates lists the values that occur more than once in s.
func duplicates(s []string) []string {
	seen := map[string]int{}
	var out []string
	for _, v := range s {
		if seen[v]++; seen[v] == 2 {
			out = append(out, v)
		}
	}
	return out
}
