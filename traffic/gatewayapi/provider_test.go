package gatewayapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/traffic"
)

// Written out by hand from the package doc, not built with the code under test.
var (
	wantMeta = metav1.ObjectMeta{Namespace: "ns", Name: "llm-frontend", Labels: map[string]string{
		v1alpha1.LabelGraph: "llm", v1alpha1.LabelService: "Frontend", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
	}}
	wantParents = []gatewayv1.ParentReference{{Group: ptr.To(gatewayv1.Group("gateway.networking.k8s.io")), Kind: ptr.To(gatewayv1.Kind("Gateway")), Name: "public"}}
	rootPath    = &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}
)

func ref(service string, weight int32) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{
			Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: gatewayv1.ObjectName(service), Port: ptr.To(int32(8000)),
		},
		Weight: ptr.To(weight),
	}}
}

func wantRoute(rules ...gatewayv1.HTTPRouteRule) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{ObjectMeta: *wantMeta.DeepCopy(), Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: wantParents},
		Hostnames:       []gatewayv1.Hostname{"llm.example.com"},
		Rules:           rules,
	}}
}

func TestObjects(t *testing.T) {
	split := func(refs ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
		return gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Path: rootPath}}, BackendRefs: refs}
	}
	cases := map[string]struct {
		t    traffic.Traffic
		want *gatewayv1.HTTPRoute
	}{
		"two cohorts, one backendRef each in order of hash, weight the percent": {
			t:    newTraffic().cohort("bbbbbbbb", 10).cohort("aaaaaaaa", 90).get(),
			want: wantRoute(split(ref("llm-frontend-aaaaaaaa-cohort", 90), ref("llm-frontend-bbbbbbbb-cohort", 10))),
		},
		"a cohort at weight 0 keeps its backendRef, weight 0": {
			t:    newTraffic().cohort("aaaaaaaa", 0).cohort("bbbbbbbb", 100).get(),
			want: wantRoute(split(ref("llm-frontend-aaaaaaaa-cohort", 0), ref("llm-frontend-bbbbbbbb-cohort", 100))),
		},
		"a header route is the first rule, to its cohort alone": {
			t: newTraffic().cohort("aaaaaaaa", 100).cohort("bbbbbbbb", 0).header("X-Canary", "yes", "bbbbbbbb").get(),
			want: wantRoute(
				gatewayv1.HTTPRouteRule{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: rootPath, Headers: []gatewayv1.HTTPHeaderMatch{{
						Type: ptr.To(gatewayv1.HeaderMatchExact), Name: "X-Canary", Value: "yes"}}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{ref("llm-frontend-bbbbbbbb-cohort", 1)},
				},
				split(ref("llm-frontend-aaaaaaaa-cohort", 100), ref("llm-frontend-bbbbbbbb-cohort", 0))),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Provider{}.Objects(tc.t)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(traffic.Rendered{Apply: []client.Object{tc.want}}, got); diff != "" {
				t.Errorf("Objects (-want +got):\n%s", diff)
			}
			again, _ := Provider{}.Objects(tc.t)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("a second render differs (-first +second):\n%s", diff)
			}
		})
	}
}

func TestRouteParentRefs(t *testing.T) {
	other := gatewayv1.Namespace("infra")
	tr := newTraffic().cohort("aaaaaaaa", 100).parents(
		gatewayv1.ParentReference{Name: "public", SectionName: ptr.To(gatewayv1.SectionName("http"))},
		gatewayv1.ParentReference{Namespace: &other, Name: "shared", Port: ptr.To(int32(8080))},
	).get()
	got, err := Route(tr)
	if err != nil {
		t.Fatal(err)
	}
	group, kind := ptr.To(gatewayv1.Group("gateway.networking.k8s.io")), ptr.To(gatewayv1.Kind("Gateway"))
	want := []gatewayv1.ParentReference{
		{Group: group, Kind: kind, Name: "public", SectionName: ptr.To(gatewayv1.SectionName("http"))},
		{Group: group, Kind: kind, Namespace: &other, Name: "shared", Port: ptr.To(int32(8080))},
	}
	if diff := cmp.Diff(want, got.Spec.ParentRefs); diff != "" {
		t.Errorf("parentRefs (-want +got):\n%s", diff)
	}
	if tr.Spec.GatewayAPI.ParentRefs[0].Group != nil {
		t.Errorf("Route wrote its defaults into the DGD's spec")
	}
}

func TestObjectsRefused(t *testing.T) {
	noSpec := newTraffic().cohort("aaaaaaaa", 100).get()
	noSpec.Spec = v1alpha1.TrafficRouting{Proxy: &v1alpha1.ProxyRouting{}}
	cases := map[string]struct {
		t    traffic.Traffic
		want string
	}{
		"no gatewayAPI spec":                 {t: noSpec, want: "gatewayAPI is not set"},
		"no parentRef":                       {t: newTraffic().cohort("aaaaaaaa", 100).parents().get(), want: "parentRefs is empty"},
		"no cohort":                          {t: newTraffic().get(), want: "no cohort"},
		"a cohort listed twice":              {t: newTraffic().cohort("aaaaaaaa", 50).cohort("aaaaaaaa", 50).get(), want: "listed twice"},
		"a header route to no listed cohort": {t: newTraffic().cohort("aaaaaaaa", 100).header("x", "1", "cccccccc").get(), want: "cohort cccccccc, which is not listed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Provider{}.Objects(tc.t)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "HTTPRoute ns/llm-frontend") {
				t.Errorf("error %v, want ErrInvalid naming HTTPRoute ns/llm-frontend and saying %q", err, tc.want)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	infra := gatewayv1.Namespace("infra")
	tr := newTraffic().cohort("aaaaaaaa", 100).parents(
		gatewayv1.ParentReference{Name: "public", SectionName: ptr.To(gatewayv1.SectionName("http"))},
		gatewayv1.ParentReference{Name: "public", SectionName: ptr.To(gatewayv1.SectionName("https"))},
		gatewayv1.ParentReference{Namespace: &infra, Name: "public"},
		gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: "mesh"},
	).get()
	want := []client.Object{
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm-frontend"}},
		gw("ns", "public"),
		gw("infra", "public"),
	}
	if diff := cmp.Diff(want, Provider{}.Lookups(tr)); diff != "" {
		t.Errorf("Lookups (-want +got):\n%s", diff)
	}
}

func TestSelectors(t *testing.T) {
	tr := newTraffic().cohort("aaaaaaaa", 100).get()
	if got := (Provider{}).EntrySelector(tr); got != nil {
		t.Errorf("EntrySelector = %v, want nil (the controller points the entry at one cohort)", got)
	}
	if got := (Provider{}).PodLabels(tr); got != nil {
		t.Errorf("PodLabels = %v, want nil (no pods of its own)", got)
	}
	if got := (Provider{}).Kind(); got != v1alpha1.TrafficGatewayAPI {
		t.Errorf("Kind = %q", got)
	}
}

// The service label must be the one the frontend pods carry, however long or odd
// the service name: backends.Labels is what the workloads' pods get.
func TestServiceLabelMatchesPods(t *testing.T) {
	for _, svc := range []string{"Frontend", "fe.v2_", strings.Repeat("f", 62) + "-x", "-" + strings.Repeat("a", 70)} {
		dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Name: "llm"}}
		if got, want := labelValue(svc), backends.Labels(dgd, svc, "")[v1alpha1.LabelService]; got != want {
			t.Errorf("service %q: label %q, pods carry %q", svc, got, want)
		}
	}
}
