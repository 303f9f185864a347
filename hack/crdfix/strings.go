package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Admission of the strings a DGD carries into the objects the operator writes (issue 38
// §1): the API server's own rules, so that a manifest that would make the first write
// fail is refused by kubectl apply, naming the field, instead of reported afterwards as
// WriteRefused.
//
// Most of these strings sit in Kubernetes' own types embedded in the CRD (extraPodSpec,
// podTemplate, EnvVar), which take no kubebuilder markers, and inside lists without a
// bound (containers, env, volumes): a CEL rule there costs more than the API server's
// budget whatever its bounds (the estimate multiplies by every enclosing list's
// largest size, 3 MiB of request over the smallest item). So each rule is an OpenAPI
// pattern and length, which the API server checks for free (no CEL), written to be
// exactly the apimachinery function it stands for (strings_test.go compares them over
// every short string and random long ones). Only map keys, which OpenAPI cannot
// constrain, need CEL; those maps get a bound (maxProperties) that pays for it.
//
// A rule never refuses a string the API server accepts there: the patterns are the
// functions' (k8s.io/apimachinery v0.36.2 pkg/util/validation, pkg/api/validation),
// as k8s.io/kubernetes v1.36.2 pkg/apis/core/validation applies them to pod templates.

// stringRule is one API server rule as an OpenAPI pattern and length bounds (counted in
// characters, as OpenAPI counts; every accepted string is ASCII, where the two agree).
type stringRule struct {
	// name says which apimachinery function the rule is.
	name      string
	pattern   string
	maxLength int64
	minLength int64
	// required: the field must be present too (the API server refuses it missing).
	required bool
}

const (
	dns1123Label     = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	dns1123Subdomain = dns1123Label + `(\.` + dns1123Label + `)*`
	labelValue       = `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`
)

var (
	// ruleDNSLabel is validation.IsDNS1123Label: container and volume names,
	// hostname, subdomain.
	ruleDNSLabel = stringRule{name: "IsDNS1123Label", pattern: `^` + dns1123Label + `$`, maxLength: 63}
	// ruleDNSLabelOrEmpty is IsDNS1123Label of a field the API server checks only when
	// it is set (hostname, subdomain).
	ruleDNSLabelOrEmpty = stringRule{name: "IsDNS1123Label or empty", pattern: `^(` + dns1123Label + `)?$`, maxLength: 63}
	// ruleDNSSubdomain is validation.IsDNS1123Subdomain (NameIsDNSSubdomain without
	// prefix): a Secret or ConfigMap an env var reads a key of, a RuntimeClass.
	ruleDNSSubdomain = stringRule{name: "IsDNS1123Subdomain", pattern: `^` + dns1123Subdomain + `$`, maxLength: 253}
	// ruleDNSSubdomainOrEmpty is IsDNS1123Subdomain of a field checked only when set:
	// serviceAccountName, priorityClassName, nodeName.
	ruleDNSSubdomainOrEmpty = stringRule{name: "IsDNS1123Subdomain or empty", pattern: `^(` + dns1123Subdomain + `)?$`, maxLength: 253}
	// ruleDNSSubdomainPrefix is NameIsDNSSubdomain(name, true), how the API server checks
	// the Secret and ConfigMap of an envFrom (validateSecretEnvSource,
	// validateConfigMapEnvSource): a name ending in '-' is checked with its last two
	// characters replaced by "a" (maskTrailingDash), so "x-" and "ab_-" pass. The
	// second branch is exactly those: a subdomain prefix T (T + "a" a subdomain), any
	// one ASCII character, '-'. Its length is T's plus 2, at most 254; the first
	// branch's at most 253 is not in the pattern, so a 254-character subdomain that does
	// not end in '-' passes here and is refused by the first write (never the other
	// way round).
	ruleDNSSubdomainPrefix = stringRule{name: "NameIsDNSSubdomain(prefix)",
		pattern:   `^(` + dns1123Subdomain + `|((` + dns1123Label + `\.)*([a-z0-9][-a-z0-9]*)?)[\x00-\x7f]-)$`,
		maxLength: 254}
	// ruleEnvVarName is validation.IsRelaxedEnvVarName, the rule of Kubernetes v1.36
	// (RelaxedEnvironmentVariableValidation, GA and locked on since v1.34): printable
	// ASCII but '=', not empty. No length limit.
	ruleEnvVarName = stringRule{name: "IsRelaxedEnvVarName", pattern: `^[ -<>-~]+$`}
	// ruleEnvVarPrefix is an envFrom prefix: IsRelaxedEnvVarName when set.
	ruleEnvVarPrefix = stringRule{name: "IsRelaxedEnvVarName or empty", pattern: `^[ -<>-~]*$`}
	// rulePortName is validation.IsValidPortName (an IANA service name: at most 15
	// lower-case letters, digits and single inner '-', at least one letter): the name
	// of a container port (checked when set), and a probe's or handler's named port.
	// Written as: leading all-digit words, the first word with a letter, any words.
	rulePortName        = stringRule{name: "IsValidPortName", pattern: `^([0-9]+-)*[a-z0-9]*[a-z][a-z0-9]*(-[a-z0-9]+)*$`, maxLength: 15}
	rulePortNameOrEmpty = stringRule{name: "IsValidPortName or empty", pattern: `^(([0-9]+-)*[a-z0-9]*[a-z][a-z0-9]*(-[a-z0-9]+)*)?$`, maxLength: 15}
	// ruleConfigMapKey is validation.IsConfigMapKey: the key an env var reads of a Secret
	// or ConfigMap; not ".", "..", nor starting with "..".
	ruleConfigMapKey = stringRule{name: "IsConfigMapKey", pattern: `^([-_a-zA-Z0-9]|\.[-_a-zA-Z0-9])[-._a-zA-Z0-9]*$`, maxLength: 253}
	// ruleLabelValue is validation.IsValidLabelValue: every value of a label map.
	ruleLabelValue = stringRule{name: "IsValidLabelValue", pattern: `^` + labelValue + `$`, maxLength: 63}
	// ruleRequired is a name the API server only requires to be set: a volume's
	// Secret, ConfigMap or claim (validateSecretVolumeSource...).
	ruleRequired = stringRule{name: "required", minLength: 1, required: true}
	// ruleAnnotationValue bounds one annotation value by the 256 KiB the API server
	// allows all annotations of an object together (ValidateAnnotationsSize): longer
	// alone, it can never be written. The total is not checked here (a sum over a map
	// is more than the CEL budget); the first write reports it.
	ruleAnnotationValue = stringRule{name: "TotalAnnotationSizeLimitB", maxLength: 256 * 1024}
)

func (r stringRule) apply(s *apiextensionsv1.JSONSchemaProps) {
	if r.pattern != "" {
		s.Pattern = r.pattern
	}
	if r.maxLength > 0 {
		s.MaxLength = &r.maxLength
	}
	if r.minLength > 0 {
		s.MinLength = &r.minLength
	}
}

// MaxMapEntries bounds every label and annotation map of a pod's metadata (and a
// pod's nodeSelector): a CEL rule over a map's keys is charged for the largest map a
// request could hold (some 400,000 entries) unless the schema bounds it, and 16,384
// keys keep each rule under a third of the API server's per-rule budget. Kubernetes
// and Dynamo set no bound; no pod has come near (the API server refuses a pod's
// annotations past 256 KiB in all).
const MaxMapEntries = 16384

// mapKind is how the API server checks a map's keys and values.
type mapKind int

const (
	labelMap      mapKind = iota // ValidateLabels: keys IsQualifiedName, values IsValidLabelValue
	annotationMap                // ValidateAnnotations: keys IsQualifiedName in lower case
)

// keyRule is the CEL rule on a map's keys: the format library's qualifiedName is
// validation.IsQualifiedName (k8s.io/apiserver pkg/cel/library/format.go).
func keyRule(kind mapKind) apiextensionsv1.ValidationRule {
	reason := apiextensionsv1.FieldValueInvalid
	key, what := "k", "label key"
	if kind == annotationMap {
		key, what = "k.lowerAscii()", "annotation key"
	}
	bad := "self.filter(k, format.qualifiedName().validate(" + key + ").hasValue())"
	return apiextensionsv1.ValidationRule{
		Rule: "self.all(k, !format.qualifiedName().validate(" + key + ").hasValue())",
		Message: what + "s must be qualified names: an optional prefix (a DNS subdomain of at most 253 characters) and '/', " +
			"then a name of at most 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit",
		MessageExpression: "'" + what + " \"' + " + bad + "[0] + '\" is not a qualified name: an optional prefix (a DNS subdomain of at most 253 characters) and \\'/\\', " +
			"then a name of at most 63 letters, digits, \\'-\\', \\'_\\' or \\'.\\' starting and ending with a letter or digit'",
		Reason: &reason,
	}
}

// fixMap bounds and checks one label or annotation map.
func fixMap(s *apiextensionsv1.JSONSchemaProps, kind mapKind) error {
	if s.Type != "object" || s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil || s.AdditionalProperties.Schema.Type != "string" {
		return fmt.Errorf("not a map of strings")
	}
	n := int64(MaxMapEntries)
	s.MaxProperties = &n
	rule := keyRule(kind)
	for i := range s.XValidations { // already fixed: the fix is idempotent
		if s.XValidations[i].Rule == rule.Rule {
			s.XValidations[i] = rule
			rule.Rule = ""
		}
	}
	if rule.Rule != "" {
		s.XValidations = append(s.XValidations, rule)
	}
	if kind == labelMap {
		ruleLabelValue.apply(s.AdditionalProperties.Schema)
	} else {
		ruleAnnotationValue.apply(s.AdditionalProperties.Schema)
	}
	return nil
}

// podMaps are the label and annotation maps that reach a pod's metadata, by version
// (path segments: a property, "[]" a list's items, "{}" a map's values). The Ingress's
// maps are checked in api/v1alpha1 (IngressSpec), only while the Ingress is enabled.
var podMaps = map[string]map[string]mapKind{
	"v1alpha1": {
		"spec.services.{}.labels":                       labelMap,
		"spec.services.{}.annotations":                  annotationMap,
		"spec.services.{}.extraPodMetadata.labels":      labelMap,
		"spec.services.{}.extraPodMetadata.annotations": annotationMap,
		"spec.services.{}.extraPodSpec.nodeSelector":    labelMap,
	},
	"v1beta1": {
		"spec.components.[].podTemplate.metadata.labels":      labelMap,
		"spec.components.[].podTemplate.metadata.annotations": annotationMap,
		"spec.components.[].podTemplate.spec.nodeSelector":    labelMap,
	},
}

// ingressValues bound the values of the Ingress's maps as a pod's are: IngressSpec's
// rules check their keys and label values while the Ingress is enabled (a disabled one
// is kept as given, as Dynamo keeps it), which fits the CEL budget only with a value's
// length bounded; the bound holds whether enabled or not, as the host's does.
var ingressValues = map[string]stringRule{
	"spec.services.{}.ingress.labels.{}":      {name: "IsValidLabelValue length", maxLength: 63},
	"spec.services.{}.ingress.annotations.{}": ruleAnnotationValue,
}

// walk calls f on every node of the schema s, parents before children, with its path;
// f may change the node and its children.
func walk(s *apiextensionsv1.JSONSchemaProps, path string, f func(path string, s *apiextensionsv1.JSONSchemaProps) error) error {
	if err := f(path, s); err != nil {
		return err
	}
	join := func(seg string) string {
		if path == "" {
			return seg
		}
		return path + "." + seg
	}
	for k := range s.Properties {
		c := s.Properties[k]
		if err := walk(&c, join(k), f); err != nil {
			return err
		}
		s.Properties[k] = c
	}
	if s.Items != nil && s.Items.Schema != nil {
		if err := walk(s.Items.Schema, join("[]"), f); err != nil {
			return err
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		if err := walk(s.AdditionalProperties.Schema, join("{}"), f); err != nil {
			return err
		}
	}
	return nil
}

// hasProps reports whether s is an object with at least these properties: how the
// fix recognises Kubernetes' types (EnvVar, Container...) wherever they are embedded.
func hasProps(s *apiextensionsv1.JSONSchemaProps, names ...string) bool {
	for _, n := range names {
		if _, ok := s.Properties[n]; !ok {
			return false
		}
	}
	return len(names) > 0
}

// setProp applies r to property name of s. A property the schema lacks is a schema
// that changed under the fix (a new Kubernetes version): it panics, and make manifests
// fails, rather than quietly checking less.
func setProp(s *apiextensionsv1.JSONSchemaProps, name string, r stringRule) {
	c, ok := s.Properties[name]
	if !ok {
		panic(fmt.Sprintf("crdfix: no property %q to apply %s to", name, r.name))
	}
	r.apply(&c)
	// A reference's name defaults to "" (LocalObjectReference: "effectively required, but
	// [...] allowed to be empty"), which the API server refuses wherever these rules
	// apply (validateSecretEnvSource: Required; validateSecretKeySelector: not a
	// subdomain). A default must pass its own schema, so the default goes and the name
	// is required: an omitted name is refused at admission, as the write would refuse it.
	required := r.required
	if c.Default != nil && string(c.Default.Raw) == `""` && !r.admitsEmpty() {
		c.Default, required = nil, true
	}
	if required && !slices.Contains(s.Required, name) {
		s.Required = append(s.Required, name)
	}
	s.Properties[name] = c
}

// admitsEmpty reports whether r admits "".
func (r stringRule) admitsEmpty() bool {
	return r.minLength == 0 && (r.pattern == "" || regexp.MustCompile(r.pattern).MatchString(""))
}

// setPropIn applies r to property name of s's object property obj.
func setPropIn(s *apiextensionsv1.JSONSchemaProps, obj, name string, r stringRule) {
	c, ok := s.Properties[obj]
	if !ok {
		panic(fmt.Sprintf("crdfix: no property %q to apply %s to", obj, r.name))
	}
	setProp(&c, name, r)
	s.Properties[obj] = c
}

// fixStrings adds the API server's string rules to every embedded Kubernetes type of
// one version's schema that the operator renders into a pod template, and bounds and
// checks its pod label and annotation maps. It returns how many nodes of each kind it
// changed, so that a test (and the caller) can see none was missed.
func fixStrings(version string, root *apiextensionsv1.JSONSchemaProps) (map[string]int, error) {
	count := map[string]int{}
	maps := podMaps[version]
	err := walk(root, "", func(path string, s *apiextensionsv1.JSONSchemaProps) error {
		if kind, ok := maps[path]; ok {
			if err := fixMap(s, kind); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			count["map "+path]++
		}
		if r, ok := ingressValues[path]; ok && version == "v1alpha1" {
			r.apply(s)
			count["ingress value "+path]++
		}
		last := path[strings.LastIndex(path, ".")+1:]
		switch {
		case hasProps(s, "name", "value", "valueFrom"): // EnvVar, in every env list
			setProp(s, "name", ruleEnvVarName)
			count["EnvVar"]++
		case hasProps(s, "key", "name", "optional") && (last == "configMapKeyRef" || last == "secretKeyRef"):
			setProp(s, "name", ruleDNSSubdomain) // validateConfigMapKeySelector, validateSecretKeySelector
			setProp(s, "key", ruleConfigMapKey)
			count["KeySelector"]++
		case hasProps(s, "configMapRef", "prefix", "secretRef"): // EnvFromSource
			setProp(s, "prefix", ruleEnvVarPrefix)
			setPropIn(s, "configMapRef", "name", ruleDNSSubdomainPrefix)
			setPropIn(s, "secretRef", "name", ruleDNSSubdomainPrefix)
			count["EnvFromSource"]++
		case hasProps(s, "containerPort", "name", "protocol"): // ContainerPort
			setProp(s, "name", rulePortNameOrEmpty)
			count["ContainerPort"]++
		case hasProps(s, "path", "port", "scheme") || (last == "tcpSocket" && hasProps(s, "host", "port")):
			// HTTPGetAction, TCPSocketAction: a named port (validatePortNumOrName); the
			// pattern applies to a string, never to a number.
			setProp(s, "port", rulePortName)
			count["named port"]++
		case hasProps(s, "image", "name", "ports", "env"): // Container
			// mainContainer's name is the operator's ("main"), whatever the manifest says.
			if last != "mainContainer" {
				setProp(s, "name", ruleDNSLabel)
			}
			count["Container"]++
		case hasProps(s, "name", "secret", "configMap", "persistentVolumeClaim"): // Volume
			setProp(s, "name", ruleDNSLabel)
			setPropIn(s, "secret", "secretName", ruleRequired)
			setPropIn(s, "configMap", "name", ruleRequired)
			setPropIn(s, "persistentVolumeClaim", "claimName", ruleRequired)
			count["Volume"]++
		case hasProps(s, "containers", "serviceAccountName", "nodeSelector"): // PodSpec
			// (Not the deprecated serviceAccount: the API server reads it only when
			// serviceAccountName is empty, and the operator fills that in.)
			for _, f := range []string{"serviceAccountName", "priorityClassName", "nodeName"} {
				setProp(s, f, ruleDNSSubdomainOrEmpty)
			}
			setProp(s, "runtimeClassName", ruleDNSSubdomain)
			setProp(s, "hostname", ruleDNSLabelOrEmpty)
			setProp(s, "subdomain", ruleDNSLabelOrEmpty)
			count["PodSpec"]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for p := range maps {
		if count["map "+p] != 1 {
			return nil, fmt.Errorf("%s: no map at %s", version, p)
		}
	}
	return count, nil
}
