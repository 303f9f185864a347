package decide

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
)

// view is the snapshot as Decide reads it: the backend of every service resolved once,
// and the names Decide found it needs (see name).
type view struct {
	*Snapshot
	dgd       *v1alpha1.DynamoGraphDeployment
	backendOf map[string]backends.Description // service -> the backend that runs it
	needs     *Needs
	// form is how the frontends serve the worker revisions (cohorts.go), resolved once
	// the history is known.
	form form
}

// validBudget matches a maxSurge / maxUnavailable annotation value: "2" or "25%".
var validBudget = regexp.MustCompile(`^[0-9]+%?$`)

// newView reads the DGD as its pods are rendered (revisions.WithRestart: a restart id
// on every service's annotations), picks every service's backend and checks the spec as far as it can be
// checked before anything is written: a service whose backend is not available, a
// budget annotation that is no count or percentage, what render refuses, a backend's
// own limits. A problem is InvalidSpec.
func newView(s *Snapshot, needs *Needs) (*view, string) {
	v := &view{Snapshot: s, dgd: revisions.WithRestart(s.DGD), backendOf: map[string]backends.Description{}, needs: needs}
	for _, name := range v.dgd.ServiceNames() {
		svc := v.dgd.Spec.Services[name]
		b, err := backends.Choose(s.Backends, v.dgd, svc)
		if err != nil {
			return nil, fmt.Sprintf("spec.services[%s]: %v", name, err)
		}
		for _, a := range []string{v1alpha1.AnnotationMaxSurge, v1alpha1.AnnotationMaxUnavailable} {
			if val, ok := svc.Annotations[a]; ok && !validBudget.MatchString(val) {
				return nil, fmt.Sprintf("spec.services[%s].annotations[%s]: %q is not a non-negative integer or percentage", name, a, val)
			}
		}
		v.backendOf[name] = b
	}
	validate := s.Validate
	if validate == nil {
		validate = render.Validate
	}
	if err := validate(v.dgd, s.Platform); err != nil {
		return nil, err.Error()
	}
	for _, b := range v.registered() {
		if b.Validate != nil {
			if err := b.Validate(v.dgd, v.servicesOn(b.Kind)); err != nil {
				return nil, err.Error()
			}
		}
	}
	return v, ""
}

// registered lists the available backends in a fixed order (by spec.backend value).
func (v *view) registered() []backends.Description {
	types := make([]string, 0, len(v.Backends))
	for t := range v.Backends {
		types = append(types, string(t))
	}
	sort.Strings(types)
	out := make([]backends.Description, 0, len(types))
	for _, t := range types {
		out = append(out, v.Backends[v1alpha1.BackendType(t)])
	}
	return out
}

// servicesOn lists the services that run on the backend of that kind.
func (v *view) servicesOn(kind string) []string {
	var out []string
	for _, name := range v.dgd.ServiceNames() {
		if v.backendOf[name].Kind == kind {
			out = append(out, name)
		}
	}
	return out
}

// backend is the description of the backend of that kind.
func (s *Snapshot) backend(kind string) backends.Description {
	for _, b := range s.Backends {
		if b.Kind == kind {
			return b
		}
	}
	return backends.Description{Kind: kind}
}

// backendOfWorkload is the description of the backend w runs on. Dynamo's workloads
// (DynamoBackend) are none of a backend's, but scale down as the objects they are do:
// a Deployment's ReplicaSet removes unready pods first, a LeaderWorkerSet's StatefulSet
// the highest index whatever its readiness.
func (s *Snapshot) backendOfWorkload(w Workload) backends.Description {
	if w.Backend == DynamoBackend {
		return backends.Description{Kind: DynamoBackend, RemovesUnreadyFirst: w.Kind == "Deployment"}
	}
	return s.backend(w.Backend)
}

// name is the name of the workload of key on the backend of that kind: from the
// backend's description when it names without reading, else as the snapshot holds it;
// a name the snapshot lacks is asked for (Needs.Names) and "" for now.
func (v *view) name(kind string, key backends.Key) string {
	if b := v.backend(kind); b.Names != nil {
		return b.Names(v.dgd, key)
	}
	if n, ok := v.Names[key]; ok {
		return n
	}
	for _, n := range v.needs.Names {
		if n.Key == key && n.Backend == kind {
			return ""
		}
	}
	v.needs.Names = append(v.needs.Names, NameNeed{Backend: kind, Key: key})
	return ""
}

// workers are the observed workloads the planner moves (every revision): the worker
// services', and in cohort form the cohorts' frontends (rolled).
func (v *view) workers() []Workload {
	var out []Workload
	for _, w := range v.Workloads {
		if v.rolled(w.Workload) {
			out = append(out, w)
		}
	}
	return out
}

// observedNamed reports whether a workload of that name was observed.
func (s *Snapshot) observedNamed(name string) bool {
	for _, w := range s.Workloads {
		if w.Name == name {
			return true
		}
	}
	return false
}

// groupOf names the object deleting w removes: its group, or w itself.
func groupOf(w backends.Workload) string {
	if w.Group != nil {
		return w.Group.String()
	}
	return w.Kind + " " + w.Name
}

// hasGang reports whether a multinode worker of dgd runs framework.
func hasGang(dgd *v1alpha1.DynamoGraphDeployment, framework string) bool {
	for _, name := range dgd.WorkerServiceNames() {
		svc := dgd.Spec.Services[name]
		if svc.IsMultinode() {
			if f, err := render.DetectFramework(svc.ExtraPodSpec.MainContainer, dgd.Spec.BackendFramework); err == nil && f == framework {
				return true
			}
		}
	}
	return false
}
