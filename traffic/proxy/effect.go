package proxy

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/traffic"
)

// Effect judges t from the agents' reports. A split is in effect once every live proxy
// pod (listed in o.Pods and not terminating) reports the split's version, and at least
// one pod does: each agent reports only after HAProxy took every command of the split,
// so a request a client sends after that goes by it. Reports of pods not listed (gone)
// or terminating are ignored. A cohort without an address is not routed to, so a
// Traffic with one is not in effect.
func (Provider) Effect(t traffic.Traffic, o traffic.Observed) traffic.Effect {
	split, missing, err := SplitOf(t)
	if err != nil {
		return traffic.Effect{Message: err.Error()}
	}
	want := split.Version()
	reports, unreadable := reportsOf(o.Objects[traffic.Key("ConfigMap", StatusName(t))])
	e := traffic.Effect{InFlight: map[string]int64{}, InFlightKnown: true}
	var lags []string
	agreed, agree, current, live := map[string]int32(nil), true, 0, 0
	pinned, pinAgree := "", true
	for _, pod := range o.Pods {
		if pod.DeletionTimestamp != nil {
			// A terminating proxy pod still finishes its streams (HAProxy's soft stop):
			// they are in flight to their cohorts, whose frontends must outlive them.
			if r, ok := reports[pod.Name]; ok {
				for hash, c := range r.Cohorts {
					if c.InFlight > 0 {
						e.InFlight[hash] += c.InFlight
					}
				}
			}
			continue
		}
		live++
		r, ok := reports[pod.Name]
		if !ok {
			lags = append(lags, notReported(pod.Name, unreadable))
			e.InFlightKnown, agree = false, false
			continue
		}
		w := weightsOf(r)
		for hash, c := range r.Cohorts {
			if c.InFlight > 0 {
				e.InFlight[hash] += c.InFlight
			}
			e.Serving = e.Serving || c.Weight > 0
		}
		if agreed == nil {
			agreed, pinned = w, r.HeaderRoute
		}
		agree = agree && maps.Equal(agreed, w)
		pinAgree = pinAgree && pinned == r.HeaderRoute
		if r.Version == want {
			current++
			continue
		}
		lags = append(lags, lagging(pod.Name, r, want))
	}
	e.Serving = e.Serving && readyReplicas(o, t) > 0
	if agree && live > 0 {
		e.Weights = agreed
		if pinAgree && pinned != "" {
			// The reports name the cohort only; the route's header is the split's.
			e.HeaderRoute = &traffic.HeaderRoute{Hash: pinned}
			if hr := t.HeaderRoute; hr != nil && hr.Hash == pinned {
				e.HeaderRoute.Name, e.HeaderRoute.Value = hr.Name, hr.Value
			}
		}
	}
	e.InEffect = len(missing) == 0 && live > 0 && current == live
	if !e.InEffect {
		e.Message = message(t, missing, live, lags)
	}
	return e
}

// reportsOf decodes the status ConfigMap's reports by pod name; a report that does not
// decode is left out and named in unreadable.
func reportsOf(o any) (reports map[string]Report, unreadable map[string]string) {
	reports, unreadable = map[string]Report{}, map[string]string{}
	cm, ok := o.(*corev1.ConfigMap)
	if !ok || cm == nil {
		return reports, unreadable
	}
	for pod, s := range cm.Data {
		r, err := ParseReport(s)
		if err != nil {
			unreadable[pod] = err.Error()
			continue
		}
		reports[pod] = r
	}
	return reports, unreadable
}

// weightsOf is a report's weights of the cohorts it routes (a removed cohort still
// draining is not one of them).
func weightsOf(r Report) map[string]int32 {
	w := map[string]int32{}
	for hash, c := range r.Cohorts {
		if !c.Removing {
			w[hash] = c.Weight
		}
	}
	return w
}

func readyReplicas(o traffic.Observed, t traffic.Traffic) int32 {
	d, ok := o.Objects[traffic.Key("Deployment", Name(t))].(*appsv1.Deployment)
	if !ok || d == nil {
		return 0
	}
	return d.Status.ReadyReplicas
}

func notReported(pod string, unreadable map[string]string) string {
	if err, ok := unreadable[pod]; ok {
		return fmt.Sprintf("proxy pod %s's report does not decode: %s", pod, err)
	}
	return fmt.Sprintf("proxy pod %s has not reported", pod)
}

func lagging(pod string, r Report, want string) string {
	s := fmt.Sprintf("proxy pod %s applied split %q, not %s", pod, r.Version, want)
	if r.Error != "" {
		s += " (" + r.Error + ")"
	}
	return s
}

// message says what is not in effect: cohorts left out, then pods that lag, in order.
func message(t traffic.Traffic, missing []traffic.Cohort, live int, lags []string) string {
	var parts []string
	for _, c := range missing {
		parts = append(parts, fmt.Sprintf("cohort %s has no address yet (Service %s has no cluster IP), left out of the split", c.Hash, c.Service))
	}
	if live == 0 {
		parts = append(parts, fmt.Sprintf("Deployment %s has no live proxy pod", Name(t)))
	}
	sort.Strings(lags)
	parts = append(parts, lags...)
	return strings.Join(parts, "; ")
}
