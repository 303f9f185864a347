package gateway

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// module is the Gateway API's Go module, which holds its CRDs.
const module = "sigs.k8s.io/gateway-api"

// CRDDir is the directory of the Gateway API's standard-channel CRDs in the module
// cache (<module dir>/config/crd/standard, the version go.mod pins), found with `go
// list -m -f {{.Dir}}` run in this file's directory. Install it with envtest's
// CRDDirectoryPaths (which skips the directory's ValidatingAdmissionPolicy).
func CRDDir() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Dir(file)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s (go list -m): %w", module, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	if _, err := os.Stat(filepath.Join(dir, "gateway.networking.k8s.io_httproutes.yaml")); err != nil {
		return "", fmt.Errorf("the Gateway API CRDs are not in %s (run go mod download %s): %w", dir, module, err)
	}
	return dir, nil
}

// GatewayClass is a GatewayClass of controller.
func GatewayClass(name string, controller gatewayv1.GatewayController) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gatewayv1.GatewayClassSpec{ControllerName: controller}}
}

// Gateway is a Gateway of class with listeners (HTTPListener builds one).
func Gateway(ns, name, class string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: listeners},
	}
}

// HTTPListener is an HTTP listener admitting routes from namespaces of from (Same,
// All; nil allowedRoutes when from is "", the CRD's default Same).
func HTTPListener(name string, port int32, from gatewayv1.FromNamespaces) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if from != "" {
		l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(from)}}
	}
	return l
}

// StripDefaults is a copy of route with every field the HTTPRoute CRD defaults
// unset (parentRef group and kind; a rule's only match when it is the default path
// match; path matches PathPrefix "/"; header match types; backendRef group, kind and
// a weight of 1): a route as a user might write it, which the API server reads back
// with the defaults filled in.
func StripDefaults(route *gatewayv1.HTTPRoute) *gatewayv1.HTTPRoute {
	out := route.DeepCopy()
	for i := range out.Spec.ParentRefs {
		out.Spec.ParentRefs[i].Group, out.Spec.ParentRefs[i].Kind = nil, nil
	}
	for i := range out.Spec.Rules {
		rule := &out.Spec.Rules[i]
		for j := range rule.Matches {
			m := &rule.Matches[j]
			if m.Path != nil && ptr.Deref(m.Path.Type, "") == gatewayv1.PathMatchPathPrefix && ptr.Deref(m.Path.Value, "") == "/" {
				m.Path = nil
			}
			for k := range m.Headers {
				m.Headers[k].Type = nil
			}
		}
		if len(rule.Matches) == 1 && rule.Matches[0].Path == nil && len(rule.Matches[0].Headers) == 0 &&
			len(rule.Matches[0].QueryParams) == 0 && rule.Matches[0].Method == nil {
			rule.Matches = nil
		}
		for j := range rule.BackendRefs {
			b := &rule.BackendRefs[j]
			b.Group, b.Kind = nil, nil
			if ptr.Deref(b.Weight, 0) == 1 {
				b.Weight = nil
			}
		}
	}
	return out
}
