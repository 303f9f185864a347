package rendered_test

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// The strings a DGD carries into the objects the operator writes (docs/reference.md,
// "Strings the operator writes"), each a slot the generator fills: every DGD gets
// valid values of every slot it uses, odd ones included (a trailing '-' of an envFrom
// Secret, relaxed env names, an upper-case annotation prefix: admission must take
// them, and the first write must too); a DGD of the "string cases" gets one slot
// invalid (too long, upper case, '_', '/', two slashes, '=', not ASCII, empty...).
// Values are drawn until the API server's own function (api) agrees they are valid or
// invalid where they land, so a slot never offers as invalid what the API server
// takes.

// slot is one string of the list.
type slot struct {
	name string
	// alphaOnly: a field of v1alpha1 that v1beta1 has no place for (its conversion keeps
	// it in the nvidia.com/dgd-spec annotation, which no schema rule reads): not
	// generated for a DGD created as v1beta1.
	alphaOnly bool
	// field matches the refusal of a DGD whose only invalid string is this slot's.
	field *regexp.Regexp
	// api is the API server's verdict on the string where the operator writes it.
	api func(string) bool
	// grove, when set, is also what Grove's validating webhook takes of the string on
	// a DGD of backend Grove, where it is stricter than the API server (a valid value
	// is drawn to pass both; admission checks only the API server's rule).
	grove func(string) bool
	// valid and invalid draw candidates.
	valid, invalid func(g gen) string
}

func ok(errs []string) bool { return len(errs) == 0 }

func isQualified(s string) bool     { return ok(validation.IsQualifiedName(s)) }
func isAnnotationKey(s string) bool { return ok(validation.IsQualifiedName(strings.ToLower(s))) }
func isLabelValue(s string) bool    { return ok(validation.IsValidLabelValue(s)) }
func isDNSLabel(s string) bool      { return ok(validation.IsDNS1123Label(s)) }
func isDNSSubdomain(s string) bool  { return ok(validation.IsDNS1123Subdomain(s)) }
func isEnvName(s string) bool       { return ok(validation.IsRelaxedEnvVarName(s)) }

// isStrictEnvName is what Grove's PodCliqueSet webhook takes as an env var name
// (operator/internal/webhook/admission/pcs/validation/podcliqueset.go
// validateContainerEnvVars: validation.IsEnvVarName, the rule before Kubernetes
// relaxed it), as harness.GroveRejects models it.
func isStrictEnvName(s string) bool { return ok(validation.IsEnvVarName(s)) }

func isPortName(s string) bool      { return ok(validation.IsValidPortName(s)) }
func isConfigMapKey(s string) bool  { return ok(validation.IsConfigMapKey(s)) }
func isEnvFromName(s string) bool   { return ok(apimachineryvalidation.NameIsDNSSubdomain(s, true)) }
func isEnvFromPrefix(s string) bool { return s == "" || isEnvName(s) }
func isResourceName(s string) bool  { return containerResourceName(s) }
func orEmpty(f func(string) bool) func(string) bool {
	return func(s string) bool { return s == "" || f(s) }
}

// containerResourceName is k8s.io/kubernetes v1.36 pkg/apis/core/validation
// validateContainerResourceName (with helper.IsStandardContainerResourceName,
// IsNativeResource, IsExtendedResourceName).
func containerResourceName(s string) bool {
	if !isQualified(s) {
		return false
	}
	if !strings.Contains(s, "/") {
		return s == "cpu" || s == "memory" || s == "ephemeral-storage" || strings.HasPrefix(s, "hugepages-")
	}
	if strings.Contains(s, "kubernetes.io/") {
		return true
	}
	return !strings.HasPrefix(s, "requests.") && isQualified("requests."+s)
}

const (
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alnum  = lower + upper + digits
	oddSet = "_./ =~-!\té"
)

// word is n characters of alphabet, first and last alphanumeric.
func (g gen) word(n int, alphabet string) string {
	b := make([]byte, 0, n)
	for len(b) < n {
		c := g.pick(alphabet)
		if (len(b) == 0 || len(b) == n-1) && !strings.ContainsRune(lower+upper+digits, rune(c)) {
			c = g.pick(lower + digits)
		}
		b = append(b, c)
	}
	return string(b)
}

// subdomain is a DNS-1123 subdomain of about n characters.
func (g gen) subdomain(n int) string {
	var parts []string
	for left := n; left > 0; {
		k := min(left, 1+g.r.IntN(63))
		if left-k == 1 { // no room for a dot and a label: take the rest here
			k = left
		}
		k = min(k, 63)
		parts = append(parts, g.label(k, lower+digits, lower+digits+"-"))
		left -= k + 1
	}
	return strings.Join(parts, ".")
}

// qualified is a qualified name: an optional subdomain prefix and a name.
func (g gen) qualified() string {
	name := g.word(g.length(63), alnum+"-_.")
	switch g.r.IntN(3) {
	case 0:
		return name
	case 1:
		return "example.com/" + name
	}
	return g.subdomain(g.length(253)) + "/" + name
}

// mangle makes s invalid the usual ways, or returns a classic bad value.
func (g gen) mangle(s string, classics ...string) string {
	switch g.r.IntN(6) {
	case 0:
		return s + strings.Repeat("x", 64+g.r.IntN(200)) // too long
	case 1:
		return strings.ToUpper(s[:1]) + s[1:] + "X"
	case 2:
		i := g.r.IntN(len(s) + 1)
		return s[:i] + string(g.pick(oddSet)) + s[i:]
	case 3:
		return "-" + s
	case 4:
		return ""
	}
	return classics[g.r.IntN(len(classics))]
}

// slots is the list, in docs/reference.md's order.
var slots = []slot{
	{name: "service label key", alphaOnly: true, field: regexp.MustCompile(`spec\.services\[[^]]+\]\.labels: Invalid value: label key`), api: isQualified,
		valid:   func(g gen) string { return g.qualified() },
		invalid: func(g gen) string { return g.mangle(g.qualified(), "team/a/b", "Example.com/x", "a/", "/a", "x y") }},
	{name: "service label value", alphaOnly: true, field: regexp.MustCompile(`spec\.services\.[^.]+\.labels\.`), api: isLabelValue,
		valid:   func(g gen) string { return []string{"", g.word(g.length(63), alnum+"-_.")}[g.r.IntN(2)] },
		invalid: func(g gen) string { return g.mangle(g.word(g.length(60), alnum), "a b", "-x", "x_", "a/b") }},
	{name: "service annotation key", alphaOnly: true, field: regexp.MustCompile(`spec\.services\[[^]]+\]\.annotations: Invalid value: annotation key`), api: isAnnotationKey,
		valid:   func(g gen) string { return []string{g.qualified(), "Example.COM/" + g.word(8, alnum)}[g.r.IntN(2)] },
		invalid: func(g gen) string { return g.mangle(g.qualified(), "bad key!", "a/b/c", "x/") }},
	{name: "pod label key", field: regexp.MustCompile(`(extraPodMetadata|podTemplate\.metadata)\.labels: Invalid value: label key`), api: isQualified,
		valid:   func(g gen) string { return g.qualified() },
		invalid: func(g gen) string { return g.mangle(g.qualified(), "team/a/b", "Upper.Domain/x") }},
	{name: "pod label value", field: regexp.MustCompile(`(extraPodMetadata|podTemplate\.metadata)\.labels\.`), api: isLabelValue,
		valid:   func(g gen) string { return []string{"", g.word(g.length(63), alnum+"-_.")}[g.r.IntN(2)] },
		invalid: func(g gen) string { return g.mangle(g.word(g.length(60), alnum), "a b", "x-") }},
	{name: "pod annotation key", field: regexp.MustCompile(`(extraPodMetadata|podTemplate\.metadata)\.annotations: Invalid value: annotation key`), api: isAnnotationKey,
		valid:   func(g gen) string { return []string{g.qualified(), "Example.COM/" + g.word(8, alnum)}[g.r.IntN(2)] },
		invalid: func(g gen) string { return g.mangle(g.qualified(), "a/b/c", "bad key") }},
	{name: "env var name", field: regexp.MustCompile(`(\.envs|\.env)\[\d+\]\.name: (Invalid value|Required value|Too long)`), api: isEnvName, grove: isStrictEnvName,
		valid:   func(g gen) string { return g.envName() },
		invalid: func(g gen) string { return g.mangle(g.envName()+"=", "A=B", "CAFÉ", "TAB\tX", "=") }},
	{name: "graph env var name", field: regexp.MustCompile(`spec\.envs?\[\d+\]\.name: (Invalid value|Required value|Too long)`), api: isEnvName, grove: isStrictEnvName,
		valid:   func(g gen) string { return g.envName() },
		invalid: func(g gen) string { return g.mangle(g.envName()+"=", "MY=VAR", "é") }},
	{name: "envFromSecret", field: regexp.MustCompile(`(envFromSecret|envFrom\[\d+\]\.secretRef\.name): (Invalid value|Required value|Too long)`), api: isEnvFromName,
		valid: func(g gen) string {
			return []string{g.subdomain(g.length(253)), g.subdomain(g.length(60)) + "-", "hf-token", "ab_-"}[g.r.IntN(4)]
		},
		invalid: func(g gen) string { return g.mangle(g.subdomain(g.length(60)), "Not_A_Valid/Name", "a..b", "UPPER") }},
	{name: "env Secret key ref", field: regexp.MustCompile(`valueFrom\.secretKeyRef\.(name|key): (Invalid value|Required value|Too long)`), api: isDNSSubdomain,
		valid:   func(g gen) string { return g.subdomain(g.length(253)) },
		invalid: func(g gen) string { return g.mangle(g.subdomain(g.length(60)), "HF_Token", "a/b") }},
	{name: "env ConfigMap key", field: regexp.MustCompile(`valueFrom\.configMapKeyRef\.key: (Invalid value|Required value|Too long)`), api: isConfigMapKey,
		valid:   func(g gen) string { return []string{g.word(g.length(253), alnum+"-_."), ".env", "a..b"}[g.r.IntN(3)] },
		invalid: func(g gen) string { return g.mangle(g.word(g.length(60), alnum), "..", ".", "..x", "a/b") }},
	{name: "envFrom ConfigMap", field: regexp.MustCompile(`envFrom\[\d+\]\.configMapRef\.name: (Invalid value|Required value|Too long)`), api: isEnvFromName,
		valid:   func(g gen) string { return []string{g.subdomain(g.length(253)), "cfg-", "x_-"}[g.r.IntN(3)] },
		invalid: func(g gen) string { return g.mangle(g.subdomain(g.length(60)), "My/Config", "a_b") }},
	{name: "envFrom prefix", field: regexp.MustCompile(`envFrom\[\d+\]\.prefix: (Invalid value|Required value|Too long)`), api: isEnvFromPrefix,
		valid:   func(g gen) string { return []string{"", "HF_", g.envName()}[g.r.IntN(3)] },
		invalid: func(g gen) string { return []string{"HF=", "é_", "A\tB", "=="}[g.r.IntN(4)] }},
	{name: "container port name", field: regexp.MustCompile(`ports\[\d+\]\.name: (Invalid value|Required value|Too long)`), api: orEmpty(isPortName),
		valid: func(g gen) string {
			return []string{"", "system", "http", "a1", "1-a", "x-y-z0123456789"[:min(15, 1+g.r.IntN(15))]}[g.r.IntN(6)]
		},
		invalid: func(g gen) string {
			return []string{"8000", "-http", "http-", "a--b", "HTTP", "system-metrics-x", "a_b"}[g.r.IntN(7)]
		}},
	{name: "probe named port", field: regexp.MustCompile(`(readinessProbe|livenessProbe)\.httpGet\.port: (Invalid value|Required value|Too long)`), api: isPortName,
		valid:   func(g gen) string { return []string{"system", "http", "metrics", "nixl"}[g.r.IntN(4)] },
		invalid: func(g gen) string { return []string{"8000", "9090", "System", "a--b", ""}[g.r.IntN(5)] }},
	{name: "sidecar name", field: regexp.MustCompile(`containers\[\d+\]\.name: (Invalid value|Required value|Too long)`), api: isDNSLabel,
		valid:   func(g gen) string { return "sc" + g.label(g.length(61), lower+digits, lower+digits+"-") },
		invalid: func(g gen) string { return g.mangle("sc-"+g.label(8, lower, lower), "Sidecar", "sc_1", "sc.x") }},
	{name: "init container name", field: regexp.MustCompile(`initContainers\[\d+\]\.name: (Invalid value|Required value|Too long)`), api: isDNSLabel,
		valid:   func(g gen) string { return "in" + g.label(g.length(61), lower+digits, lower+digits+"-") },
		invalid: func(g gen) string { return g.mangle("in-"+g.label(8, lower, lower), "Init", "in_1") }},
	{name: "volume name", field: regexp.MustCompile(`volumes\[\d+\]\.name: (Invalid value|Required value|Too long)`), api: isDNSLabel,
		valid:   func(g gen) string { return "v" + g.label(g.length(62), lower+digits, lower+digits+"-") },
		invalid: func(g gen) string { return g.mangle("v-"+g.label(8, lower, lower), "Cache", "v.x") }},
	{name: "volume Secret", field: regexp.MustCompile(`volumes\[\d+\]\.secret\.secretName`), api: func(s string) bool { return s != "" },
		valid:   func(g gen) string { return []string{"creds", "Any_Name/Goes"}[g.r.IntN(2)] },
		invalid: func(g gen) string { return "" }},
	{name: "serviceAccountName", field: regexp.MustCompile(`serviceAccountName: (Invalid value|Required value|Too long)`), api: orEmpty(isDNSSubdomain),
		valid:   func(g gen) string { return g.subdomain(g.length(253)) },
		invalid: func(g gen) string { return g.mangle(g.subdomain(g.length(60)), "my_sa", "SA") }},
	{name: "priorityClassName", field: regexp.MustCompile(`priorityClassName: (Invalid value|Required value|Too long)`), api: orEmpty(isDNSSubdomain),
		valid:   func(g gen) string { return g.subdomain(g.length(253)) },
		invalid: func(g gen) string { return g.mangle(g.subdomain(g.length(60)), "High", "a_b") }},
	{name: "hostname", field: regexp.MustCompile(`\.hostname: (Invalid value|Required value|Too long)`), api: orEmpty(isDNSLabel),
		valid:   func(g gen) string { return g.label(g.length(63), lower+digits, lower+digits+"-") },
		invalid: func(g gen) string { return g.mangle(g.label(8, lower, lower), "a.b", "Host") }},
	{name: "nodeSelector key", field: regexp.MustCompile(`nodeSelector: Invalid value: label key`), api: isQualified,
		valid:   func(g gen) string { return g.qualified() },
		invalid: func(g gen) string { return g.mangle(g.qualified(), "a/b/c", "Node.Kubernetes.io/x") }},
	{name: "nodeSelector value", field: regexp.MustCompile(`nodeSelector\.`), api: isLabelValue,
		valid:   func(g gen) string { return []string{"", "H100", g.word(g.length(63), alnum+"-_.")}[g.r.IntN(3)] },
		invalid: func(g gen) string { return g.mangle(g.word(8, alnum), "H100 SXM", "a/b") }},
	{name: "Ingress class", alphaOnly: true, field: regexp.MustCompile(`ingress\.ingressControllerClassName: (Invalid value|Required value|Too long)`), api: isDNSSubdomain,
		valid:   func(g gen) string { return g.subdomain(g.length(253)) },
		invalid: func(g gen) string { return g.mangle(g.subdomain(g.length(60)), "nginx_internal", "Nginx") }},
	{name: "Ingress TLS Secret", alphaOnly: true, field: regexp.MustCompile(`ingress\.tls\.secretName: (Invalid value|Required value|Too long)`), api: orEmpty(isDNSSubdomain),
		valid:   func(g gen) string { return g.subdomain(g.length(253)) },
		invalid: func(g gen) string { return g.mangle(g.subdomain(g.length(60)), "My_TLS", "a/b") }},
	{name: "Ingress label key", alphaOnly: true, field: regexp.MustCompile(`ingress\.labels: Invalid value`), api: isQualified,
		valid:   func(g gen) string { return g.qualified() },
		invalid: func(g gen) string { return g.mangle(g.qualified(), "a/b/c") }},
	{name: "Ingress label value", alphaOnly: true, field: regexp.MustCompile(`ingress\.labels(: Invalid value|\.[^:]+: Too long)`), api: isLabelValue,
		valid:   func(g gen) string { return g.word(g.length(63), alnum+"-_.") },
		invalid: func(g gen) string { return g.mangle(g.word(8, alnum), "a b") }},
	{name: "Ingress annotation key", alphaOnly: true, field: regexp.MustCompile(`ingress\.annotations: Invalid value`), api: isAnnotationKey,
		valid:   func(g gen) string { return g.qualified() },
		invalid: func(g gen) string { return g.mangle(g.qualified(), "bad key") }},
	{name: "gpuType", alphaOnly: true, field: regexp.MustCompile(`resources\.limits\.gpuType: (Invalid value|Required value|Too long)`), api: isResourceName,
		valid: func(g gen) string {
			return []string{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "example.com/" + g.word(g.length(63), alnum+"-_.")}[g.r.IntN(4)]
		},
		invalid: func(g gen) string {
			return []string{"h100", "gpu", "requests.nvidia.com/gpu", "Nvidia.com/gpu", "nvidia.com/"}[g.r.IntN(5)]
		}},
	{name: "custom resource", alphaOnly: true, field: regexp.MustCompile(`resources\.limits\.custom: Invalid value`), api: isResourceName,
		valid: func(g gen) string {
			// (not hugepages-<size>: its quantity must be a multiple of the page size
			// and come with cpu or memory, rules of the value, not of the name)
			return []string{"example.com/fpga", "ephemeral-storage", "kubernetes.io/x", "rdma/hca_" + g.word(4, lower)}[g.r.IntN(4)]
		},
		invalid: func(g gen) string {
			return []string{"fpga", "requests.example.com/x", "Example.com/x", "pods"}[g.r.IntN(4)]
		}},
}

// envName is a valid env var name: mostly a shell one, sometimes what Kubernetes v1.36
// also takes (dots, dashes, spaces, a leading digit).
func (g gen) envName() string {
	if g.r.IntN(2) == 0 {
		return "DYN_" + g.word(1+g.r.IntN(20), upper+digits+"_")
	}
	b := []byte{g.pick(" -<>-~!9.")}
	for range g.r.IntN(30) {
		c := byte(0x20 + g.r.IntN(0x7f-0x20))
		if c == '=' {
			c = '.'
		}
		b = append(b, c)
	}
	if b[0] == '=' {
		b[0] = 'x'
	}
	return string(b)
}

var slotByName = func() map[string]*slot {
	m := map[string]*slot{}
	for i := range slots {
		m[slots[i].name] = &slots[i]
	}
	return m
}()

// str draws a valid and an invalid value of the slot (both, always: the DGD made with
// the slot valid and the one with it invalid draw the same random numbers, so they
// differ in that string only) and returns the one this DGD asks for.
func (g gen) str(name string) string {
	s := slotByName[name]
	if s == nil {
		panic("no slot " + name)
	}
	validHere := s.api
	if s.grove != nil && g.grove {
		validHere = func(v string) bool { return s.api(v) && s.grove(v) }
	}
	draw := func(f func(gen) string, want bool, verdict func(string) bool) string {
		for range 100 {
			if v := f(g); verdict(v) == want {
				return v
			}
		}
		panic(fmt.Sprintf("slot %s: no %v value in 100 draws", name, want))
	}
	valid, invalid := draw(s.valid, true, validHere), draw(s.invalid, false, s.api)
	if g.strs.invalid && g.strs.bad == name {
		return invalid
	}
	return valid
}

// uses reports whether this DGD sets the slot's field: always the bad slot's, else one
// time in three.
func (g gen) uses(name string) bool {
	return g.r.IntN(3) == 0 || g.strs.bad == name
}

// strsPlan is a DGD's string plan: which slot is bad, and whether this is the DGD with
// it invalid (the other, its twin, has it valid).
type strsPlan struct {
	bad     string
	invalid bool
}

// serviceStrings sets the strings of a service the generator varies.
func (g gen) serviceStrings(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
	if !g.beta {
		if g.uses("service label key") || g.uses("service label value") {
			s.Labels = map[string]string{g.str("service label key"): g.str("service label value")}
		}
		if g.uses("service annotation key") {
			s.Annotations = map[string]string{g.str("service annotation key"): "any text: spaces, \"quotes\", é\n"}
		}
		if g.uses("gpuType") || g.uses("custom resource") {
			if s.Resources == nil {
				s.Resources = &v1alpha1.Resources{}
			}
			if s.Resources.Limits == nil {
				s.Resources.Limits = &v1alpha1.ResourceItem{}
			}
			l := s.Resources.Limits
			if l.GPU == "" {
				l.GPU = "1"
			}
			l.GPUType = g.str("gpuType")
			l.Custom = map[string]string{g.str("custom resource"): "1"}
		}
	}
	if g.uses("pod label key") || g.uses("pod label value") || g.uses("pod annotation key") {
		s.ExtraPodMetadata = &v1alpha1.ExtraPodMetadata{
			Labels:      map[string]string{g.str("pod label key"): g.str("pod label value")},
			Annotations: map[string]string{g.str("pod annotation key"): "x"},
		}
	}
	if g.uses("env var name") {
		s.Envs = append(s.Envs, corev1.EnvVar{Name: g.str("env var name"), Value: "1"})
	}
	if g.uses("envFromSecret") {
		if name := g.str("envFromSecret"); !g.beta {
			s.EnvFromSecret = ptr.To(name)
		} else {
			// v1beta1's envFromSecret is main's envFrom: written there, for the
			// conversion would keep a v1alpha1 envFromSecret beside mainContainer's own
			// envFrom only in its nvidia.com/dgd-spec annotation, which no v1beta1 rule
			// reads.
			s.ExtraPodSpec.MainContainer.EnvFrom = append(s.ExtraPodSpec.MainContainer.EnvFrom,
				corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
		}
	}
	if g.uses("probe named port") {
		s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString(g.str("probe named port"))}}}
	}
	main := s.ExtraPodSpec.MainContainer
	if g.uses("env Secret key ref") || g.uses("env ConfigMap key") {
		main.Env = append(main.Env,
			corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: g.str("env Secret key ref")}, Key: "token"}}},
			corev1.EnvVar{Name: "CONFIG", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: g.str("env ConfigMap key")}}})
	}
	if g.uses("envFrom ConfigMap") || g.uses("envFrom prefix") {
		main.EnvFrom = append(main.EnvFrom, corev1.EnvFromSource{Prefix: g.str("envFrom prefix"),
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: g.str("envFrom ConfigMap")}}})
	}
	if g.uses("container port name") {
		// The main container's ports replace Dynamo's: keep the one its probes and
		// Service name.
		port := map[bool]string{true: "http", false: "system"}[s.ComponentType == v1alpha1.ComponentTypeFrontend]
		main.Ports = []corev1.ContainerPort{{Name: port, ContainerPort: 8000, Protocol: corev1.ProtocolTCP},
			{Name: g.str("container port name"), ContainerPort: 9999, Protocol: corev1.ProtocolTCP}}
		if main.Ports[1].Name == port {
			main.Ports[1].Name = ""
		}
	}
	pod := s.ExtraPodSpec
	if pod.PodSpec == nil {
		pod.PodSpec = &corev1.PodSpec{}
	}
	if g.uses("sidecar name") {
		pod.Containers = append(pod.Containers, corev1.Container{Name: g.str("sidecar name"), Image: "busybox:1.37"})
	}
	if g.uses("init container name") {
		pod.InitContainers = append(pod.InitContainers, corev1.Container{Name: g.str("init container name"), Image: "busybox:1.37"})
	}
	if g.uses("volume name") || g.uses("volume Secret") {
		pod.Volumes = append(pod.Volumes,
			corev1.Volume{Name: g.str("volume name"), VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			corev1.Volume{Name: "secret-vol", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: g.str("volume Secret")}}})
	}
	if g.uses("serviceAccountName") {
		pod.ServiceAccountName = g.str("serviceAccountName")
	}
	if g.uses("priorityClassName") {
		pod.PriorityClassName = g.str("priorityClassName")
	}
	if g.uses("hostname") {
		pod.Hostname = g.str("hostname")
	}
	if g.uses("nodeSelector key") || g.uses("nodeSelector value") {
		pod.NodeSelector = map[string]string{g.str("nodeSelector key"): g.str("nodeSelector value")}
	}
}

// ingressStrings sets the strings of an (enabled) Ingress.
func (g gen) ingressStrings(in *v1alpha1.IngressSpec) {
	if g.uses("Ingress class") {
		in.IngressControllerClassName = ptr.To(g.str("Ingress class"))
	}
	if g.uses("Ingress TLS Secret") {
		in.TLS = &v1alpha1.IngressTLSSpec{SecretName: g.str("Ingress TLS Secret")}
	}
	if g.uses("Ingress label key") || g.uses("Ingress label value") {
		in.Labels = map[string]string{g.str("Ingress label key"): g.str("Ingress label value")}
	}
	if g.uses("Ingress annotation key") {
		in.Annotations = map[string]string{g.str("Ingress annotation key"): "x"}
	}
}

// graphStrings sets the graph-level strings: spec.envs and, for admission only (the
// first pass routes no traffic), parentRefs that gateway-api's rules take.
func (g gen) graphStrings(d *v1alpha1.DynamoGraphDeployment) {
	if g.uses("graph env var name") {
		d.Spec.Envs = append(d.Spec.Envs, corev1.EnvVar{Name: g.str("graph env var name"), Value: "1"})
	}
	if g.r.IntN(4) == 0 {
		d.Spec.Rollout = &v1alpha1.RolloutSpec{TrafficRouting: &v1alpha1.TrafficRouting{GatewayAPI: &v1alpha1.GatewayAPIRouting{
			ParentRefs: []gatewayv1.ParentReference{{Name: "gw", SectionName: ptr.To(gatewayv1.SectionName("http"))},
				{Name: "gw", SectionName: ptr.To(gatewayv1.SectionName("https"))}, {Name: "other"}}}}}
	}
}

// badSlot is the slot case i of a string case makes invalid: the slots a DGD of its
// version has, in turn, so that each is the bad one in about as many cases.
func badSlot(i int, beta bool) string {
	var have []string
	for _, s := range slots {
		if !beta || !s.alphaOnly {
			have = append(have, s.name)
		}
	}
	return have[i%len(have)]
}
