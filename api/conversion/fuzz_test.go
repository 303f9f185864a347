package conversion

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
)

// FuzzAlphaRoundTrip checks that every v1alpha1 DGD A converts to v1beta1 and back
// unchanged: FromHub(ToHub(A)) == A (Dynamo's round-trip guarantee, the spoke side).
// Seeds: every v1alpha1 manifest of config/samples and test/testdata/dynamo.
func FuzzAlphaRoundTrip(f *testing.F) {
	for _, s := range seeds(f, "v1alpha1") {
		f.Add(s)
	}
	for _, s := range alphaEdgeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, ok := decodeAlpha(data)
		if !ok {
			return
		}
		var b v1beta1.DynamoGraphDeployment
		if err := ToHub(a, &b); err != nil {
			t.Fatalf("ToHub: %v", err)
		}
		b2 := viaJSON(t, &b, &v1beta1.DynamoGraphDeployment{}) // what the API server stores
		var back v1alpha1.DynamoGraphDeployment
		if err := FromHub(b2, &back); err != nil {
			t.Fatalf("FromHub: %v", err)
		}
		back.TypeMeta = a.TypeMeta
		if !equal(a, &back) {
			t.Fatalf("v1alpha1 -> v1beta1 -> v1alpha1 changed the object (-want +got):\n%s\nv1beta1:\n%s", cmp.Diff(a, &back), js(b2))
		}
	})
}

// FuzzBetaRoundTrip checks that every v1beta1 DGD V converts to v1alpha1 and back
// unchanged: ToHub(FromHub(V)) == V (the hub side).
func FuzzBetaRoundTrip(f *testing.F) {
	for _, s := range seeds(f, "v1beta1") {
		f.Add(s)
	}
	for _, s := range betaEdgeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok := decodeBeta(data)
		if !ok {
			return
		}
		var a v1alpha1.DynamoGraphDeployment
		if err := FromHub(v, &a); err != nil {
			if hasDuplicateNames(v) {
				return // the API server refuses duplicates (listMapKey name)
			}
			t.Fatalf("FromHub: %v", err)
		}
		a2 := viaJSON(t, &a, &v1alpha1.DynamoGraphDeployment{})
		var back v1beta1.DynamoGraphDeployment
		if err := ToHub(a2, &back); err != nil {
			t.Fatalf("ToHub: %v", err)
		}
		back.TypeMeta = v.TypeMeta
		if !equal(v, &back) {
			t.Fatalf("v1beta1 -> v1alpha1 -> v1beta1 changed the object (-want +got):\n%s\nv1alpha1:\n%s", cmp.Diff(v, &back), js(a2))
		}
	})
}

var alphaEdgeSeeds = []string{
	`{"spec":{"services":{"a":null,"b":{}}}}`,
	`{"spec":{"services":{"w":{"componentType":"worker","subComponentType":"decode","envs":[{"name":"A","value":"1"}],"extraPodSpec":{"mainContainer":{"image":"x","env":[{"name":"A","value":"2"},{"name":"B"}]}}}}}}`,
	`{"spec":{"services":{"w":{"componentType":"prefill","subComponentType":"decode","serviceName":"other","sharedMemory":{"disabled":true,"size":"1Gi"}}}}}`,
	`{"spec":{"services":{"w":{"sharedMemory":{},"resources":{"limits":{"gpu":"1","gpuType":"nvidia.com/mig-1g","cpu":"0.5","custom":{"x/y":"2"}}},"envFromSecret":""}}}}`,
	`{"spec":{"services":{"w":{"volumeMounts":[{"name":"a","mountPoint":"/a","useAsCompilationCache":true},{"name":"b","mountPoint":"/b"},{"name":"c","mountPoint":"/c","useAsCompilationCache":true}]}}}}`,
	`{"spec":{"services":{"f":{"componentType":"frontend","frontendSidecar":{"image":"s","args":["a"],"envFromSecret":"sec"},"scalingAdapter":{"enabled":false},"gpuMemoryService":{"enabled":false,"mode":"IntraPod"},"failover":{"enabled":true,"numShadows":1}}}}}`,
	`{"spec":{"pvcs":[{"name":"p"}],"dynamoGraph":"g","topologyConstraint":{"topologyProfile":"t","packDomain":"rack"},"envs":[{"name":"E"}],"services":{"w":{"ingress":{"enabled":true,"host":"h"},"dynamoNamespace":"ns","labels":{"a":"b"},"annotations":{"c":"d"},"extraPodMetadata":{},"extraPodSpec":{}}}}}`,
	`{"spec":{"rollout":{"steps":[{"partition":"50%"},{"analysis":{"metrics":[{"name":"up","query":"up{x=\"{{args.e}}\"}","successCondition":"result > 0.0"}],"templates":[{"templateName":"error-rate"},{"templateName":"error-rate","clusterScope":true}],"args":[{"name":"e","value":"generate"},{"name":"max"},{"name":"empty","value":""}]}}]}}}`,
	`{"spec":{"services":{"w":{"livenessProbe":{"periodSeconds":3},"extraPodSpec":{"mainContainer":{"name":"main","readinessProbe":{"periodSeconds":4},"resources":{"limits":{"cpu":"1"}}},"containers":[{"name":"side","image":"s"},{"name":"main","image":"dropped"}]}}}}}`,
}

var betaEdgeSeeds = []string{
	`{"spec":{"components":[{"name":"w","type":"decode"}],"rollout":{"steps":[{"partition":"50%"},{"analysis":{"metrics":[{"name":"up","query":"up{x=\"{{args.e}}\"}","successCondition":"result > 0.0"}],"templates":[{"templateName":"error-rate"},{"templateName":"error-rate","clusterScope":true}],"args":[{"name":"e","value":"generate"},{"name":"max"},{"name":"empty","value":""}]}}]}}}`,
	`{"spec":{"components":[{"name":"b","type":"decode"},{"name":"a","type":"prefill"}]}}`,
	`{"spec":{"components":[{"name":"w","podTemplate":{"metadata":{"name":"x","labels":{"a":"b"}},"spec":{"containers":[{"name":"side","image":"s"},{"name":"main","image":"m","env":[{"name":"A"}],"volumeMounts":[{"name":"cache","mountPath":"/c"},{"name":"v","mountPath":"/v","readOnly":true}]}]}},"compilationCache":{"pvcName":"cache","mountPath":"/c"}}]}}`,
	`{"spec":{"components":[{"name":"w","podTemplate":{},"sharedMemorySize":"0","scalingAdapter":{},"experimental":{"grove":{"forceScalingGroup":true},"gpuMemoryService":{"mode":"IntraPod"}}}]}}`,
	`{"spec":{"components":[{"name":"f","type":"frontend","frontendSidecar":"sidecar-frontend","podTemplate":{"spec":{"containers":[{"name":"main","image":"m"},{"name":"sidecar-frontend","image":"s"}]}}}]}}`,
	`{"spec":{"components":[{"name":"w","compilationCache":{"pvcName":"c"},"podTemplate":{"spec":{"containers":[{"name":"other","image":"x"}]}}}]}}`,
}

// seeds are the manifests of the given version in config/samples and test/testdata/dynamo.
func seeds(f *testing.F, version string) [][]byte {
	var out [][]byte
	for _, dir := range []string{"../../config/samples", "../../config/samples/v1beta1", "../../test/testdata/dynamo"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			j, err := yaml.YAMLToJSON(raw)
			if err != nil {
				f.Fatalf("%s: %v", file, err)
			}
			var tm struct {
				APIVersion string `json:"apiVersion"`
			}
			if json.Unmarshal(j, &tm) == nil && tm.APIVersion == "nvidia.com/"+version {
				out = append(out, j)
			}
		}
	}
	if len(out) == 0 {
		f.Fatalf("no %s seeds", version)
	}
	return out
}

// decodeAlpha reads a v1alpha1 DGD as the API server would hold it (a JSON round trip
// of the typed object), without the reserved conversion annotations (a user's own are
// consumed, as Dynamo's are).
func decodeAlpha(data []byte) (*v1alpha1.DynamoGraphDeployment, bool) {
	var a v1alpha1.DynamoGraphDeployment
	if json.Unmarshal(data, &a) != nil {
		return nil, false
	}
	stripReserved(a.Annotations)
	out := &v1alpha1.DynamoGraphDeployment{}
	b, err := json.Marshal(&a)
	if err != nil || json.Unmarshal(b, out) != nil {
		return nil, false
	}
	return out, true
}

func decodeBeta(data []byte) (*v1beta1.DynamoGraphDeployment, bool) {
	var v v1beta1.DynamoGraphDeployment
	if json.Unmarshal(data, &v) != nil {
		return nil, false
	}
	stripReserved(v.Annotations)
	out := &v1beta1.DynamoGraphDeployment{}
	b, err := json.Marshal(&v)
	if err != nil || json.Unmarshal(b, out) != nil {
		return nil, false
	}
	return out, true
}

func stripReserved(m map[string]string) {
	for k := range m {
		if IsConversionAnnotation(k) {
			delete(m, k)
		}
	}
}

func hasDuplicateNames(v *v1beta1.DynamoGraphDeployment) bool {
	seen := map[string]bool{}
	for _, c := range v.Spec.Components {
		if seen[c.ComponentName] {
			return true
		}
		seen[c.ComponentName] = true
	}
	return false
}

// viaJSON is obj after a JSON round trip into out.
func viaJSON[T any](t *testing.T, obj any, out *T) *T {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func js(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
