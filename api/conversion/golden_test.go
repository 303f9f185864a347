package conversion

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
)

// TestGoldens are hand-written from DYNAMO-V1BETA1.md §2, one per row of its mapping
// tables: the v1alpha1 service on the left converts to the v1beta1 component on the
// right (spec.components[0]; the payload is checked where the row says a value is
// kept in the annotation), and back to the same v1alpha1 service.
func TestGoldens(t *testing.T) {
	tests := []struct {
		name, alpha, beta string
		// payload, when set, is the sparse v1alpha1 service the nvidia.com/dgd-spec
		// annotation must hold (services.w); "" requires no annotation.
		payload string
	}{{
		name: "extraPodSpec.mainContainer into podTemplate: main first, dedicated fields under mainContainer's, pod fields kept",
		alpha: `{componentType: worker, envs: [{name: A, value: "1"}, {name: B, value: dedicated}],
		  livenessProbe: {periodSeconds: 5},
		  extraPodSpec: {nodeSelector: {pool: gpu}, containers: [{name: side, image: s}],
		    mainContainer: {image: img, command: [python3], args: [-m, dynamo.vllm], ports: [{containerPort: 1}],
		      env: [{name: B, value: main}, {name: C, value: "3"}], volumeMounts: [{name: m, mountPath: /m}]}}}`,
		beta: `{name: w, type: worker, podTemplate: {spec: {nodeSelector: {pool: gpu}, containers: [
		  {name: main, image: img, command: [python3], args: [-m, dynamo.vllm], ports: [{containerPort: 1}],
		   env: [{name: A, value: "1"}, {name: B, value: main}, {name: C, value: "3"}],
		   volumeMounts: [{name: m, mountPath: /m}], livenessProbe: {periodSeconds: 5}},
		  {name: side, image: s}]}}}`,
		payload: `{componentType: worker, envs: [{name: A, value: "1"}, {name: B, value: dedicated}],
		  livenessProbe: {periodSeconds: 5},
		  extraPodSpec: {nodeSelector: {pool: gpu}, containers: [{name: side, image: s}],
		    mainContainer: {image: img, command: [python3], args: [-m, dynamo.vllm], ports: [{containerPort: 1}],
		      env: [{name: B, value: main}, {name: C, value: "3"}], volumeMounts: [{name: m, mountPath: /m}]}}}`,
	}, {
		// It converts back as it was: no payload.
		name: "resources: gpu is nvidia.com/gpu, gpuType names the resource, custom as given",
		alpha: `{componentType: worker, resources: {requests: {cpu: "2", memory: 8Gi}, limits: {gpu: "2", custom: {rdma/ib: "1"}}},
		  extraPodSpec: {mainContainer: {image: img}}}`,
		beta: `{name: w, type: worker, podTemplate: {spec: {containers: [{name: main, image: img,
		  resources: {requests: {cpu: "2", memory: 8Gi}, limits: {nvidia.com/gpu: "2", rdma/ib: "1"}}}]}}}`,
	}, {
		name:    "resources: a gpuType other than nvidia.com/gpu is its resource name (and comes back as custom, so it is kept)",
		alpha:   `{componentType: worker, resources: {limits: {gpu: "1", gpuType: nvidia.com/mig-1g.10gb}}}`,
		beta:    `{name: w, type: worker, podTemplate: {spec: {containers: [{name: main, resources: {limits: {nvidia.com/mig-1g.10gb: "1"}}}]}}}`,
		payload: `{componentType: worker, resources: {limits: {gpu: "1", gpuType: nvidia.com/mig-1g.10gb}}}`,
	}, {
		name:  "sharedMemory size to sharedMemorySize",
		alpha: `{componentType: worker, sharedMemory: {size: 16Gi}}`,
		beta:  `{name: w, type: worker, sharedMemorySize: 16Gi}`,
	}, {
		name:  "sharedMemory disabled to sharedMemorySize 0",
		alpha: `{componentType: worker, sharedMemory: {disabled: true}}`,
		beta:  `{name: w, type: worker, sharedMemorySize: "0"}`,
	}, {
		name:    "sharedMemory {} (the default) has no v1beta1 field: kept",
		alpha:   `{componentType: worker, sharedMemory: {}}`,
		beta:    `{name: w, type: worker}`,
		payload: `{componentType: worker, sharedMemory: {}}`,
	}, {
		name:  "volumeMounts: the first useAsCompilationCache is compilationCache, every mount a main-container mount",
		alpha: `{componentType: worker, volumeMounts: [{name: cache, mountPoint: /root/.cache/vllm, useAsCompilationCache: true}, {name: models, mountPoint: /models}]}`,
		beta: `{name: w, type: worker, compilationCache: {pvcName: cache, mountPath: /root/.cache/vllm},
		  podTemplate: {spec: {containers: [{name: main, volumeMounts: [{name: cache, mountPath: /root/.cache/vllm}, {name: models, mountPath: /models}]}]}}}`,
		payload: `{componentType: worker, volumeMounts: [{name: cache, mountPoint: /root/.cache/vllm, useAsCompilationCache: true}, {name: models, mountPoint: /models}]}`,
	}, {
		name:  "a compilation-cache mount alone makes no podTemplate",
		alpha: `{componentType: worker, volumeMounts: [{name: cache, mountPoint: /c, useAsCompilationCache: true}]}`,
		beta:  `{name: w, type: worker, compilationCache: {pvcName: cache, mountPath: /c}}`,
	}, {
		name:  "componentType worker + subComponentType decode is type decode",
		alpha: `{componentType: worker, subComponentType: decode}`,
		beta:  `{name: w, type: decode}`,
	}, {
		name:  "componentType worker + subComponentType prefill is type prefill",
		alpha: `{componentType: worker, subComponentType: prefill}`,
		beta:  `{name: w, type: prefill}`,
	}, {
		name:    "another subComponentType is kept; the type is componentType as written",
		alpha:   `{componentType: planner, subComponentType: special}`,
		beta:    `{name: w, type: planner}`,
		payload: `{componentType: planner, subComponentType: special}`,
	}, {
		name:    "envFromSecret is an envFrom secretRef of main (and kept, as Dynamo keeps it)",
		alpha:   `{componentType: worker, envFromSecret: hf-token-secret, extraPodSpec: {mainContainer: {image: img}}}`,
		beta:    `{name: w, type: worker, podTemplate: {spec: {containers: [{name: main, image: img, envFrom: [{secretRef: {name: hf-token-secret}}]}]}}}`,
		payload: `{componentType: worker, envFromSecret: hf-token-secret, extraPodSpec: {mainContainer: {image: img}}}`,
	}, {
		name:  "frontendSidecar is container sidecar-frontend, referenced by name",
		alpha: `{componentType: frontend, frontendSidecar: {image: fe, args: [--x], envs: [{name: E, value: v}], envFromSecret: s}, extraPodSpec: {mainContainer: {image: img}}}`,
		beta: `{name: w, type: frontend, frontendSidecar: sidecar-frontend, podTemplate: {spec: {containers: [{name: main, image: img},
		  {name: sidecar-frontend, image: fe, args: [--x], env: [{name: E, value: v}], envFrom: [{secretRef: {name: s}}]}]}}}`,
		payload: `{componentType: frontend, frontendSidecar: {image: fe, args: [--x], envs: [{name: E, value: v}], envFromSecret: s}, extraPodSpec: {mainContainer: {image: img}}}`,
	}, {
		name: "ingress, component labels and annotations, dynamoNamespace are v1alpha1-only: kept in the annotation",
		alpha: `{componentType: frontend, labels: {team: a}, annotations: {note: b}, dynamoNamespace: ns,
		  ingress: {enabled: true, host: chat}}`,
		beta: `{name: w, type: frontend}`,
		payload: `{componentType: frontend, labels: {team: a}, annotations: {note: b}, dynamoNamespace: ns,
		  ingress: {enabled: true, host: chat}}`,
	}, {
		name:  "scalingAdapter enabled is the presence marker",
		alpha: `{componentType: worker, scalingAdapter: {enabled: true}}`,
		beta:  `{name: w, type: worker, scalingAdapter: {}}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var svc v1alpha1.DynamoComponentDeploymentSharedSpec
			mustYAML(t, tc.alpha, &svc)
			a := &v1alpha1.DynamoGraphDeployment{Spec: v1alpha1.DynamoGraphDeploymentSpec{
				Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"w": &svc}}}
			var b v1beta1.DynamoGraphDeployment
			if err := ToHub(a, &b); err != nil {
				t.Fatal(err)
			}
			var want v1beta1.DynamoComponentDeploymentSharedSpec
			mustYAML(t, tc.beta, &want)
			if len(b.Spec.Components) != 1 || !equal(b.Spec.Components[0], want) {
				t.Errorf("v1beta1 component (-want +got):\n%s", cmp.Diff(want, b.Spec.Components))
			}
			checkPayload(t, b.Annotations[AnnotationSpec], tc.payload)
			var back v1alpha1.DynamoGraphDeployment
			if err := FromHub(viaJSON(t, &b, &v1beta1.DynamoGraphDeployment{}), &back); err != nil {
				t.Fatal(err)
			}
			if !equal(back.Spec, a.Spec) {
				t.Errorf("back to v1alpha1 (-want +got):\n%s", cmp.Diff(a.Spec, back.Spec))
			}
		})
	}
}

// TestGoldenGraph covers §2.2: the graph-level rows.
func TestGoldenGraph(t *testing.T) {
	var a v1alpha1.DynamoGraphDeployment
	mustYAML(t, `{metadata: {name: g, annotations: {keep: me}}, spec: {
	  envs: [{name: E, value: v}], pvcs: [{name: models, create: true}], backendFramework: vllm,
	  topologyConstraint: {topologyProfile: t, packDomain: rack},
	  backend: LeaderWorkerSet, revisionHistoryLimit: 3, rollout: {partition: 50%},
	  services: {b: {componentType: decode}, a: {componentType: frontend}}},
	  status: {observedGeneration: 2, ready: 1/1, services: {a: {replicas: 1, readyReplicas: 1, updatedReplicas: 1, availableReplicas: 1}},
	    rollingUpdate: {phase: Completed, updatedServices: [b]}}}`, &a)
	var b v1beta1.DynamoGraphDeployment
	if err := ToHub(&a, &b); err != nil {
		t.Fatal(err)
	}
	var want v1beta1.DynamoGraphDeployment
	mustYAML(t, `{metadata: {name: g, annotations: {keep: me}}, spec: {
	  env: [{name: E, value: v}], backendFramework: vllm,
	  topologyConstraint: {clusterTopologyName: t, packDomain: rack},
	  backend: LeaderWorkerSet, revisionHistoryLimit: 3, rollout: {partition: 50%},
	  components: [{name: a, type: frontend}, {name: b, type: decode}]},
	  status: {observedGeneration: 2, ready: 1/1, components: {a: {replicas: 1, readyReplicas: 1, updatedReplicas: 1, availableReplicas: 1}},
	    rollingUpdate: {phase: Completed, updatedComponents: [b]}}}`, &want)
	payload := b.Annotations[AnnotationSpec]
	delete(b.Annotations, AnnotationSpec)
	b.TypeMeta = want.TypeMeta
	if !equal(&b, &want) {
		t.Errorf("v1beta1 (-want +got):\n%s", cmp.Diff(&want, &b))
	}
	// pvcs are v1alpha1-only: the payload is Dynamo's envelope holding them.
	var env struct {
		Version int `json:"version"`
		Spec    struct {
			PVCs []map[string]any `json:"pvcs"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(payload), &env); err != nil || env.Version != 1 || len(env.Spec.PVCs) != 1 || env.Spec.PVCs[0]["name"] != "models" {
		t.Errorf("payload %s: want {\"version\":1,\"spec\":{\"pvcs\":[{...models...}]}}", payload)
	}
	b.Annotations[AnnotationSpec] = payload
	var back v1alpha1.DynamoGraphDeployment
	if err := FromHub(&b, &back); err != nil {
		t.Fatal(err)
	}
	back.TypeMeta = a.TypeMeta
	if !equal(&back, &a) {
		t.Errorf("back (-want +got):\n%s", cmp.Diff(&a, &back))
	}
}

// TestDynamoPayload reads a v1beta1 object whose nvidia.com/dgd-spec Dynamo's operator
// wrote (its envelope and sparse v1alpha1 spec: an origin-split record of the main
// container's env and the alpha-only fields) into the v1alpha1 Dynamo would give, also
// after the image changed in v1beta1 (the live value wins, the split still applies).
func TestDynamoPayload(t *testing.T) {
	var b v1beta1.DynamoGraphDeployment
	mustYAML(t, `{metadata: {name: g, annotations: {nvidia.com/dgd-spec: '{"version":1,"spec":{"services":{"w":{
	  "dynamoNamespace":"legacy","envFromSecret":"hf","envs":[{"name":"A","value":"1"}],
	  "extraPodSpec":{"mainContainer":{"env":[{"name":"B","value":"2"}],"envFrom":[]}}}}}}'}},
	  spec: {components: [{name: w, type: decode, podTemplate: {spec: {containers: [{name: main, image: img:2,
	    env: [{name: A, value: "1"}, {name: B, value: "2"}], envFrom: [{secretRef: {name: hf}}]}]}}}]}}`, &b)
	var a v1alpha1.DynamoGraphDeployment
	if err := FromHub(&b, &a); err != nil {
		t.Fatal(err)
	}
	var want v1alpha1.DynamoComponentDeploymentSharedSpec
	mustYAML(t, `{componentType: worker, subComponentType: decode, dynamoNamespace: legacy, envFromSecret: hf,
	  envs: [{name: A, value: "1"}], extraPodSpec: {mainContainer: {image: img:2, env: [{name: B, value: "2"}]}}}`, &want)
	if got := a.Spec.Services["w"]; !equal(got, &want) {
		t.Errorf("v1alpha1 service (-want +got):\n%s", cmp.Diff(&want, got))
	}
	if _, ok := a.Annotations[AnnotationSpec]; ok {
		t.Errorf("the spoke payload must be consumed, got %v", a.Annotations)
	}
}

func mustYAML(t *testing.T, s string, out any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(s), out); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
}

// checkPayload compares the sparse service w of the annotation with want ("" = none).
func checkPayload(t *testing.T, got, want string) {
	t.Helper()
	if want == "" {
		if got != "" {
			t.Errorf("unexpected nvidia.com/dgd-spec %s", got)
		}
		return
	}
	var spec v1alpha1.DynamoGraphDeploymentSpec
	if !unmarshalPayload(got, &spec) {
		t.Fatalf("nvidia.com/dgd-spec %q is not Dynamo's envelope", got)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal([]byte(got), &env); err != nil || string(env["version"]) != "1" {
		t.Errorf("nvidia.com/dgd-spec %s: want version 1", got)
	}
	var w v1alpha1.DynamoComponentDeploymentSharedSpec
	mustYAML(t, want, &w)
	if !equal(spec.Services["w"], &w) {
		t.Errorf("payload services.w (-want +got):\n%s", cmp.Diff(&w, spec.Services["w"]))
	}
}
