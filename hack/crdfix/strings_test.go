package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// admits is what the API server's OpenAPI validation of a CRD decides for s under r:
// kube-openapi pkg/validation/validate values.go (MinLength, MaxLength count runes;
// Pattern is Go's regexp, unanchored unless the pattern anchors).
func (r stringRule) admits(s string) bool {
	n := int64(utf8.RuneCountInString(s))
	if r.maxLength > 0 && n > r.maxLength || n < r.minLength {
		return false
	}
	return r.pattern == "" || compiled(r.pattern).MatchString(s)
}

var regexps = map[string]*regexp.Regexp{}

func compiled(p string) *regexp.Regexp {
	if re, ok := regexps[p]; ok {
		return re
	}
	regexps[p] = regexp.MustCompile(p)
	return regexps[p]
}

func ok(errs []string) bool { return len(errs) == 0 }

// strings of every length up to 4 over characters that decide these rules, and random
// ones around every length bound.
func samples() []string {
	alphabet := []string{"a", "z", "A", "0", "9", "-", ".", "_", "/", "=", " ", "~", "\x7f", "\n", "`", "é"}
	out := []string{""}
	level := []string{""}
	for range 4 {
		var next []string
		for _, s := range level {
			for _, c := range alphabet {
				next = append(next, s+c)
			}
		}
		out = append(out, next...)
		level = next
	}
	r := rand.New(rand.NewPCG(38, 1))
	for _, n := range []int{14, 15, 16, 62, 63, 64, 252, 253, 254, 255, 300} {
		// valid in shape, at the length: a, a-a..., a.a...
		out = append(out, strings.Repeat("a", n), strings.Repeat("a", n-1)+"-", (strings.Repeat("a.", n/2) + "aa")[:n])
		for range 300 {
			b := make([]byte, n)
			for i := range b {
				b[i] = "abc019-."[r.IntN(8)]
			}
			if r.IntN(2) == 0 {
				b[0], b[n-1] = 'a', 'z'
			}
			if r.IntN(4) == 0 {
				b[n-1] = '-'
			}
			out = append(out, string(b))
		}
	}
	return out
}

// TestRulesAreTheAPIServers checks every rule against the apimachinery function it
// stands for, over the samples: the same verdict, or (where a comment says so) never
// stricter.
func TestRulesAreTheAPIServers(t *testing.T) {
	type fn func(string) bool
	cases := []struct {
		name string
		rule stringRule
		api  fn
		// looser: the rule may admit what the API server refuses (a later refusal),
		// never the other way round.
		looser func(string) bool
	}{
		{"dns label", ruleDNSLabel, func(s string) bool { return ok(validation.IsDNS1123Label(s)) }, nil},
		{"dns label or empty", ruleDNSLabelOrEmpty, func(s string) bool { return s == "" || ok(validation.IsDNS1123Label(s)) }, nil},
		{"dns subdomain", ruleDNSSubdomain, func(s string) bool { return ok(validation.IsDNS1123Subdomain(s)) }, nil},
		{"dns subdomain or empty", ruleDNSSubdomainOrEmpty, func(s string) bool { return s == "" || ok(validation.IsDNS1123Subdomain(s)) }, nil},
		{"dns subdomain prefix (envFrom)", ruleDNSSubdomainPrefix,
			func(s string) bool { return ok(apimachineryvalidation.NameIsDNSSubdomain(s, true)) },
			func(s string) bool { return len(s) == 254 && !strings.HasSuffix(s, "-") }},
		{"env var name", ruleEnvVarName, func(s string) bool { return ok(validation.IsRelaxedEnvVarName(s)) }, nil},
		{"env var prefix", ruleEnvVarPrefix, func(s string) bool { return s == "" || ok(validation.IsRelaxedEnvVarName(s)) }, nil},
		{"port name", rulePortName, func(s string) bool { return ok(validation.IsValidPortName(s)) }, nil},
		{"port name or empty", rulePortNameOrEmpty, func(s string) bool { return s == "" || ok(validation.IsValidPortName(s)) }, nil},
		{"config map key", ruleConfigMapKey, func(s string) bool { return ok(validation.IsConfigMapKey(s)) }, nil},
		{"label value", ruleLabelValue, func(s string) bool { return ok(validation.IsValidLabelValue(s)) }, nil},
		{"required", ruleRequired, func(s string) bool { return s != "" }, nil},
	}
	all := samples()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loose := 0
			for _, s := range all {
				got, want := c.rule.admits(s), c.api(s)
				if got == want {
					continue
				}
				if got && c.looser != nil && c.looser(s) {
					loose++
					continue
				}
				t.Errorf("%q: pattern admits %v, the API server %v", s, got, want)
			}
			if c.looser != nil && loose == 0 {
				t.Errorf("no sample of the documented looser case: the samples do not reach it")
			}
		})
	}
}

// TestRulesRefuseTheIssuesStrings: issue 38's two manifests, and what each rule is for.
func TestRulesRefuseTheIssuesStrings(t *testing.T) {
	for _, c := range []struct {
		name string
		rule stringRule
		s    string
		want bool
	}{
		{"envFrom Secret of the issue", ruleDNSSubdomainPrefix, "Not_A_Valid/Name", false},
		{"envFrom Secret with a trailing dash (the API server masks it)", ruleDNSSubdomainPrefix, "hf-token-", true},
		{"env name with '='", ruleEnvVarName, "A=B", false},
		{"env name with a space and a dot (relaxed)", ruleEnvVarName, "my.var 1", true},
		{"port name all digits", rulePortName, "8000", false},
		{"port name of Dynamo", rulePortName, "system", true},
		{"container name upper case", ruleDNSLabel, "Sidecar", false},
		{"label value too long", ruleLabelValue, strings.Repeat("x", 64), false},
	} {
		if got := c.rule.admits(c.s); got != c.want {
			t.Errorf("%s: %q admitted %v, want %v", c.name, c.s, got, c.want)
		}
	}
}

// TestFixReachesEveryEmbeddedType runs the fix over the committed CRD's schemas (the fix
// is idempotent) and checks it found every kind of node in both versions, and the
// maps it must bound: a controller-gen or Kubernetes change that renames or moves one
// fails here, not silently in admission.
func TestFixReachesEveryEmbeddedType(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "nvidia.com_dynamographdeployments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{
		// EnvVar: spec.envs, services' envs, frontendSidecar.envs and the four
		// containers (containers, initContainers, ephemeralContainers, mainContainer).
		"v1alpha1": {"EnvVar": 7, "KeySelector": 14, "EnvFromSource": 4, "ContainerPort": 4, "named port": 44, "Container": 4, "Volume": 1, "PodSpec": 1},
		"v1beta1":  {"EnvVar": 4, "KeySelector": 8, "EnvFromSource": 3, "ContainerPort": 3, "named port": 30, "Container": 3, "Volume": 1, "PodSpec": 1},
	}
	for _, v := range crd.Spec.Versions {
		got, err := fixStrings(v.Name, v.Schema.OpenAPIV3Schema)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		for kind, n := range want[v.Name] {
			if got[kind] != n {
				t.Errorf("%s: %d %s nodes, want %d", v.Name, got[kind], kind, n)
			}
		}
		for p := range podMaps[v.Name] {
			if got["map "+p] != 1 {
				t.Errorf("%s: map %s not bounded", v.Name, p)
			}
		}
	}
}
