package grove

import (
	"context"
	"fmt"
	"sync"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	renderpkg "github.com/dgd-rollout/operator/render"
)

// PodCliqueSet names. A DGD's PodCliqueSets (one per worker revision, one per stable
// service template, one per cohort frontend template) take the first free name of backends.PodCliqueSetName's sequence
// `{dgd}`, `{dgd}-1`, `{dgd}-2`, ... (worker revisions from `{dgd}`, stable ones from
// `{dgd}-1`, so that a graph's first workers live in `{dgd}` as on Dynamo's Grove path;
// cohort frontends from `{dgd}-1` too). Which revision or template a PodCliqueSet holds
// is in its labels (the worker hash, the service and its stable hash, or for a cohort
// frontend the three), never in its name: a name is found again from the
// cluster, so a crash between creating a PodCliqueSet and writing the DGD's status
// leaves nothing to remember, and the next pass finds the PodCliqueSet by its labels
// instead of taking a second name.
//
// A name is free when no PodCliqueSet of that name exists (any owner: another DGD's
// `{dgd}` may be this one's `{dgd}-1`), no cached Service of ours is named like its
// headless Service `<name>-0` (Grove would patch it into its own: it creates or patches,
// internal/controller/podcliqueset/components/service), and that headless Service name
// is none of the DGD's own stable Service names (a service named `0` has the Service
// `{dgd}-0`, the headless Service of a PodCliqueSet named `{dgd}`).

// maxCandidates bounds the names looked at: far more PodCliqueSets than a DGD ever has
// alive at once.
const maxCandidates = 100

// pickTTL is how long a name picked for a PodCliqueSet not yet seen in the cache stays
// reserved: between a pass's Name (its expectations) and its Ensure, and until the
// cache shows the created object.
const pickTTL = time.Minute

// picks remembers names picked for PodCliqueSets that the cache does not show yet.
type picks struct {
	mu sync.Mutex
	m  map[string]pick // dgd UID + "/" + identity -> name
}

type pick struct {
	dgd  types.UID
	name string
	at   time.Time
}

func (p *picks) get(dgd types.UID, id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := string(dgd) + "/" + id
	if e, ok := p.m[k]; ok && time.Since(e.at) < pickTTL {
		return e.name, true
	}
	delete(p.m, k)
	return "", false
}

func (p *picks) put(dgd types.UID, id, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]pick{}
	}
	p.m[string(dgd)+"/"+id] = pick{dgd: dgd, name: name, at: time.Now()}
}

func (p *picks) forget(dgd types.UID, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, string(dgd)+"/"+id)
}

// reserved lists the names picked (and not expired) for a DGD's other identities.
func (p *picks) reserved(dgd types.UID, except string) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for k, e := range p.m {
		if e.dgd == dgd && k != string(dgd)+"/"+except && time.Since(e.at) < pickTTL {
			out[e.name] = true
		}
	}
	return out
}

// workerID and stableID identify a PodCliqueSet by what it holds (cohortID, a cohort
// frontend's: cohort.go).
func workerID(hash string) string            { return "worker/" + hash }
func stableID(service, stable string) string { return "stable/" + service + "/" + stable }

// HeadlessServiceName is the Service Grove creates for replica 0 of PodCliqueSet pcs,
// which every pod of it has as its subdomain (api/common/namegen.go
// GenerateHeadlessServiceName; ours have one replica).
func HeadlessServiceName(pcs string) string { return pcs + "-0" }

// room is how long a PodCliqueSet's name may be for Grove to accept it with these
// placements (validatePodNameConstraints: PodCliqueSet + scaling group + clique <= 45).
func room(places map[string]placement) int {
	r := MaxNameLength
	for _, pl := range places {
		n := len(pl.Clique)
		if pl.Group != "" {
			n = len(pl.Group) + len(pl.Group+LeaderSuffix)
		}
		r = min(r, MaxNameLength-n)
	}
	return r
}

// find returns the live PodCliqueSet of dgd that holds id, from the cache, or nil.
func (b *Backend) find(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, id string) (*grovev1.PodCliqueSet, error) {
	var list grovev1.PodCliqueSetList
	if err := backends.ListControlled(ctx, b.Client, &list, dgd); err != nil {
		return nil, fmt.Errorf("listing PodCliqueSets of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	for i := range list.Items {
		pcs := &list.Items[i]
		if identity(dgd, pcs) == id && pcs.DeletionTimestamp.IsZero() {
			return pcs, nil
		}
	}
	return nil, nil
}

// identity is what a PodCliqueSet of dgd holds: a worker revision, a cohort
// frontend's template at a revision (cohort.go), or a stable service's template.
func identity(dgd *v1alpha1.DynamoGraphDeployment, pcs *grovev1.PodCliqueSet) string {
	if h := workerHash(pcs); h != "" {
		if svc, ok := cohortService(pcs); ok {
			return cohortID(backends.Key{Service: svc, Hash: h}, cohortTemplate(pcs))
		}
		return workerID(h)
	}
	for service := range placements(pcs) {
		return stableID(service, pcsStableHash(dgd, pcs))
	}
	return ""
}

// nameFor is the name of the PodCliqueSet holding id: the live one's, else the one
// picked for it, else the first free candidate from first on, at most max characters.
func (b *Backend) nameFor(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, id string, first, max int) (string, error) {
	pcs, err := b.find(ctx, dgd, id)
	if err != nil {
		return "", err
	}
	if pcs != nil {
		b.picked.forget(dgd.UID, id)
		return pcs.Name, nil
	}
	if name, ok := b.picked.get(dgd.UID, id); ok {
		return name, nil
	}
	taken, err := b.taken(ctx, dgd)
	if err != nil {
		return "", err
	}
	reserved := b.picked.reserved(dgd.UID, id)
	for k := first; k < maxCandidates; k++ {
		name, ok := backends.PodCliqueSetName(dgd.Name, k, max)
		if !ok {
			break
		}
		if !taken(name) && !reserved[name] {
			b.picked.put(dgd.UID, id, name)
			return name, nil
		}
	}
	return "", &backends.SpecError{Err: &NoNameError{DGD: dgd.Name, Room: max}}
}

// NoNameError says that no free PodCliqueSet name fits Grove's limit: the DGD's names
// leave the PodCliqueSet too few characters to tell a second one from the first.
type NoNameError struct {
	DGD  string
	Room int
}

func (e *NoNameError) Error() string {
	return fmt.Sprintf("no free PodCliqueSet name of at most %d characters for DynamoGraphDeployment %s: Grove's 45-character limit leaves its names no room for a second PodCliqueSet beside the first (`%s-1` needs %d); shorten the DGD or service names",
		e.Room, e.DGD, e.DGD, len(e.DGD)+2)
}

// taken reports the names a new PodCliqueSet of dgd cannot take (see the comment on
// names above): every PodCliqueSet's of the namespace, and every name whose headless
// Service would be a cached Service of ours or one of dgd's own stable Services.
func (b *Backend) taken(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) (func(string) bool, error) {
	var list grovev1.PodCliqueSetList
	if err := b.Client.List(ctx, &list, client.InNamespace(dgd.Namespace)); err != nil {
		return nil, fmt.Errorf("listing PodCliqueSets of %s: %w", dgd.Namespace, err)
	}
	var svcs corev1.ServiceList
	if err := b.Client.List(ctx, &svcs, client.InNamespace(dgd.Namespace)); err != nil {
		return nil, fmt.Errorf("listing Services of %s: %w", dgd.Namespace, err)
	}
	names := map[string]bool{}
	for _, p := range list.Items {
		names[p.Name] = true
	}
	if b.Reader != nil {
		// The cache holds only the operator's PodCliqueSets (app.CacheOptions); another
		// owner's take their names too. Read when a name is picked: once per revision.
		var live metav1.PartialObjectMetadataList
		live.SetGroupVersionKind(grovev1.SchemeGroupVersion.WithKind("PodCliqueSetList"))
		if err := b.Reader.List(ctx, &live, client.InNamespace(dgd.Namespace)); err != nil {
			return nil, fmt.Errorf("listing PodCliqueSets of %s: %w", dgd.Namespace, err)
		}
		for _, p := range live.Items {
			names[p.Name] = true
		}
	}
	headless := map[string]bool{}
	for _, s := range svcs.Items {
		headless[s.Name] = true
	}
	for _, name := range dgd.ServiceNames() {
		if !dgd.Spec.Services[name].IsWorker() {
			headless[renderpkg.ServiceName(dgd.Name, name, "", backends.WorkloadName)] = true
		}
	}
	return func(name string) bool { return names[name] || headless[HeadlessServiceName(name)] }, nil
}
