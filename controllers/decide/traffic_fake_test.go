package decide_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
)

// fakeProxy is a traffic provider for the golden table: it renders the split as a
// ConfigMap `{entry}-proxy` ("hash=weight,..." and the header route) and reads what is
// in effect from `{entry}-proxy-status`, which the world's agent writes (agentApplies):
// the proxy's shape (traffic/proxy), without its HAProxy specifics.
type fakeProxy struct{}

var _ traffic.Provider = fakeProxy{}

func (fakeProxy) Kind() string { return v1alpha1.TrafficProxy }

// desired is the split as the fake writes it.
func desired(t traffic.Traffic) string {
	var parts []string
	for _, c := range t.Cohorts {
		if c.Address == "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d", c.Hash, c.Weight))
	}
	s := strings.Join(parts, ",")
	if h := t.HeaderRoute; h != nil {
		s += fmt.Sprintf(";%s:%s->%s", h.Name, h.Value, h.Hash)
	}
	return s
}

func (fakeProxy) Objects(t traffic.Traffic) (traffic.Rendered, error) {
	labels := map[string]string{v1alpha1.LabelGraph: t.DGD.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: t.Entry + "-proxy", Namespace: t.DGD.Namespace, Labels: labels},
		Data: map[string]string{"split": desired(t)}}
	st := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: t.Entry + "-proxy-status", Namespace: t.DGD.Namespace, Labels: labels}}
	return traffic.Rendered{Apply: []client.Object{cm}, Create: []client.Object{st}}, nil
}

func (fakeProxy) Lookups(t traffic.Traffic) []client.Object {
	return []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: t.Entry + "-proxy-status", Namespace: t.DGD.Namespace}}}
}

func (fakeProxy) PodLabels(traffic.Traffic) map[string]string { return nil }

func (fakeProxy) EntrySelector(t traffic.Traffic) map[string]string {
	return map[string]string{v1alpha1.LabelGraph: t.DGD.Name, "proxy": t.Frontend}
}

// annotationUnservable, on the world's DGD, is what the fake's Effect reports as
// Unservable (a Gateway provider's parent Gateway that does not exist).
const annotationUnservable = "test.dgd-rollout/unservable"

func (p fakeProxy) Effect(t traffic.Traffic, o traffic.Observed) traffic.Effect {
	e := p.effect(t, o)
	e.Unservable = t.DGD.Annotations[annotationUnservable]
	return e
}

func (fakeProxy) effect(t traffic.Traffic, o traffic.Observed) traffic.Effect {
	st, _ := o.Objects[traffic.Key("ConfigMap", t.Entry+"-proxy-status")].(*corev1.ConfigMap)
	if st == nil || st.Data["applied"] == "" {
		return traffic.Effect{Message: "no proxy has applied a split yet"}
	}
	e := traffic.Effect{Weights: map[string]int32{}, InFlight: map[string]int64{}, InFlightKnown: st.Data["inflight-unknown"] != "true"}
	applied := st.Data["applied"]
	split, hdr, _ := strings.Cut(applied, ";")
	if hdr != "" {
		nv, hash, _ := strings.Cut(hdr, "->")
		n, val, _ := strings.Cut(nv, ":")
		e.HeaderRoute = &traffic.HeaderRoute{Name: n, Value: val, Hash: hash}
	}
	for _, kv := range strings.Split(split, ",") {
		h, w, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(w)
		e.Weights[h] = int32(n)
		e.Serving = e.Serving || n > 0
	}
	for _, kv := range strings.Split(st.Data["inflight"], ",") {
		if h, n, ok := strings.Cut(kv, "="); ok {
			c, _ := strconv.Atoi(n)
			e.InFlight[h] = int64(c)
		}
	}
	e.InEffect = applied == desired(t)
	if !e.InEffect {
		e.Message = fmt.Sprintf("the proxy applied %q, not %q yet", applied, desired(t))
	}
	return e
}

// agentApplies plays the proxy's agents: every desired split is applied at once, and
// the cohorts in flight are as the world says (inflight: hash -> requests).
func (w *world) agentApplies() {
	for key, o := range w.objects.Named {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || !strings.HasSuffix(key, "-proxy") {
			continue
		}
		st, _ := w.objects.Named[key+"-status"].(*corev1.ConfigMap)
		if st == nil {
			continue
		}
		st = st.DeepCopy()
		st.Data = map[string]string{"applied": cm.Data["split"]}
		var in []string
		for _, h := range sortedKeysOf(w.inflight) {
			in = append(in, fmt.Sprintf("%s=%d", h, w.inflight[h]))
		}
		st.Data["inflight"] = strings.Join(in, ",")
		if w.inflightUnknown {
			st.Data["inflight-unknown"] = "true"
		}
		w.objects.Named[key+"-status"] = st
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
