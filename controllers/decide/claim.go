package decide

import (
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// ObjectName is the kind and name of an object in the DGD's namespace.
type ObjectName struct{ Kind, Name string }

// HolderNeed is a name a decision's write would create an object under: the pass
// reads which object holds it now (Snapshot.Holders) before it writes anything.
type HolderNeed struct {
	ObjectName
	// Object is the object to create (an object write), nil for a workload.
	Object client.Object
	// Backend is the Kind of the backend of a workload (Description.Kind), else "".
	Backend string
}

// Holder is what holds a name: nothing (Exists false) or an object and its controller.
// Deleting: the object is going (a deletion timestamp), so the name is being freed.
type Holder struct {
	Exists     bool
	Controller *metav1.OwnerReference
	Deleting   bool
}

// claim checks, before any write of dec is made, that every name its writes would
// create an object under is free or already the DGD's (issue 23: two DGDs whose
// names collide, "llm" with a service "prefill-fe" and "llm-prefill" with "fe"). It
// asks for the holders it has not read yet (Needs.Holders); a name another object
// holds stops the pass before its first write, with the NameConflict status naming
// the object and its controller, so neither DGD's running pods are touched. Writes
// the DGD is only one of the owners of, and workloads whose backend names them from
// the cluster (Grove picks a free name), are not checked. A create that still finds
// its name taken (a race with the read) is reported as before (Outcome.Conflicts,
// Stopped).
func claim(s *Snapshot, dec Decision) Decision {
	if dec.Wait != "" || dec.Needs.Any() || len(dec.Writes) == 0 {
		return dec
	}
	var need []HolderNeed
	var taken []string
	seen := map[ObjectName]bool{}
	for _, w := range dec.Writes {
		if n, ok := frees(w); ok {
			seen[n] = true // deleted first by the decision itself (Dynamo's frontend)
		}
		for _, n := range creates(s, w) {
			if seen[n.ObjectName] {
				continue
			}
			seen[n.ObjectName] = true
			h, ok := s.Holders[n.ObjectName]
			switch {
			case !ok:
				need = append(need, n)
			case h.Exists && !h.Deleting && (h.Controller == nil || h.Controller.UID != s.DGD.UID):
				e := &backends.NameConflictError{Kind: n.Kind, Namespace: s.DGD.Namespace, Name: n.Name, DGD: s.DGD.Name}
				if h.Controller != nil {
					e.Owner = h.Controller.Kind + " " + h.Controller.Name
				}
				taken = append(taken, e.Error())
			}
		}
	}
	switch {
	case len(need) > 0:
		return Decision{Needs: Needs{Holders: need}}
	case len(taken) > 0:
		sort.Strings(taken)
		d := newDraft()
		d.requeueIn(ConflictRecheck)
		return stop(s, d, v1alpha1.ReasonNameConflict, strings.Join(taken, "; "))
	}
	return dec
}

// creates are the names w would create an object under that the snapshot does not
// show as the DGD's: an object write the DGD is to control, and each workload of an
// Ensure that is not among the DGD's workloads, when its backend names it from the
// DGD alone. A name the decision deletes the holder of before (Dynamo's frontend
// Deployment, released with propagation Orphan) and a holder being deleted are not in
// the way; a create that still finds it there is judged then.
func creates(s *Snapshot, w Write) []HolderNeed {
	switch w.Op {
	case CreateObject:
		if !w.Controller {
			return nil
		}
		return []HolderNeed{{ObjectName: ObjectName{Kind: w.Kind, Name: w.Object.GetName()}, Object: w.Object}}
	case Ensure:
		desc := s.backend(w.Backend)
		if desc.Names == nil {
			return nil
		}
		var out []HolderNeed
		for _, sw := range w.Pool.Services {
			name := desc.Names(s.DGD, sw.Key)
			if !s.observedNamed(name) {
				out = append(out, HolderNeed{ObjectName: ObjectName{Kind: w.Backend, Name: name}, Backend: w.Backend})
			}
		}
		return out
	}
	return nil
}

// frees is the name a write deletes the object of, if any.
func frees(w Write) (ObjectName, bool) {
	switch w.Op {
	case DeleteObject:
		return ObjectName{Kind: w.Kind, Name: w.Object.GetName()}, true
	case DeleteWorkload:
		return ObjectName{Kind: w.Workload.Kind, Name: w.Workload.Name}, true
	}
	return ObjectName{}, false
}
