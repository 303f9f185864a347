package dynamoview

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DWMGVK is the GroupVersionKind of DynamoWorkerMetadata.
var DWMGVK = schema.GroupVersionKind{Group: DWMGroup, Version: DWMVersion, Kind: DWMKind}

// DiscoveryMetadata is the decoded `spec.data` of a DWM
// (lib/runtime/src/discovery/metadata.rs). Null or missing maps decode as empty
// (deserialize_null_default). event_channels and event_sources are kept raw.
type DiscoveryMetadata struct {
	Endpoints     map[string]EndpointRecord  `json:"endpoints"`
	ModelCards    map[string]ModelRecord     `json:"model_cards"`
	EventChannels map[string]json.RawMessage `json:"event_channels"`
	EventSources  map[string]json.RawMessage `json:"event_sources,omitempty"`
}

// EndpointRecord is a `{"type":"Endpoint", ...}` value of DiscoveryMetadata.endpoints.
type EndpointRecord struct {
	Type       string          `json:"type"`
	Namespace  string          `json:"namespace"`
	Component  string          `json:"component"`
	Endpoint   string          `json:"endpoint"`
	InstanceID uint64          `json:"instance_id"`
	Transport  json.RawMessage `json:"transport,omitempty"`
}

// ModelRecord is a `{"type":"Model", ...}` value of DiscoveryMetadata.model_cards.
type ModelRecord struct {
	Type        string          `json:"type"`
	Namespace   string          `json:"namespace"`
	Component   string          `json:"component"`
	Endpoint    string          `json:"endpoint"`
	InstanceID  uint64          `json:"instance_id"`
	CardJSON    json.RawMessage `json:"card_json"`
	ModelSuffix string          `json:"model_suffix,omitempty"`
}

// ModelCard holds the fields of a ModelDeploymentCard that discovery reads
// (lib/llm/src/discovery/watcher.rs and readiness.rs).
type ModelCard struct {
	DisplayName string         `json:"display_name"`
	WorkerType  WorkerType     `json:"worker_type,omitempty"`
	Needs       [][]WorkerType `json:"needs,omitempty"`
	// ModelType is kept raw: its serialized form was not verified; it is only used to
	// spot legacy prefill cards (readiness.rs normalize_legacy_prefill_topology).
	ModelType json.RawMessage `json:"model_type,omitempty"`
}

// Card decodes the record's card_json. card_json may be a JSON object or a string
// holding one.
func (m ModelRecord) Card() (ModelCard, error) {
	raw := []byte(m.CardJSON)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(s)
	}
	var card ModelCard
	if err := json.Unmarshal(raw, &card); err != nil {
		return ModelCard{}, fmt.Errorf("card_json: %w", err)
	}
	return card, nil
}

// EndpointKey is the map key of a record: "{ns}/{component}/{endpoint}/{id:x}"
// (EndpointInstanceId::to_path, lowercase hex).
func EndpointKey(ns, component, endpoint string, id uint64) string {
	return fmt.Sprintf("%s/%s/%s/%x", ns, component, endpoint, id)
}

// Metadata renders the DynamoWorkerMetadata the runtime rt in pod would server-side-apply
// in pod discovery mode (lib/runtime/src/discovery/kube/crd.rs, build_cr): named after
// the pod, in the pod's namespace, with one controller ownerReference to the pod
// (blockOwnerDeletion false, no labels) and spec.data = DiscoveryMetadata. A worker
// publishes one Endpoint and one Model record under "{ns}/{component}/{endpoint}/{id}";
// a frontend (or a non-worker) publishes empty maps. The transport value
// `{"tcp": "<podIP>"}` is illustrative: its serde form was not verified and nothing here
// reads it.
func Metadata(pod *corev1.Pod, rt Runtime) *unstructured.Unstructured {
	id := InstanceID(pod.Name)
	endpoints := map[string]interface{}{}
	cards := map[string]interface{}{}
	if rt.IsWorker() {
		key := EndpointKey(rt.Namespace, rt.Component, rt.Endpoint, id)
		host := pod.Status.PodIP
		if host == "" {
			host = pod.Name
		}
		endpoints[key] = map[string]interface{}{
			"type":        "Endpoint",
			"namespace":   rt.Namespace,
			"component":   rt.Component,
			"endpoint":    rt.Endpoint,
			"instance_id": int64(id),
			"transport":   map[string]interface{}{"tcp": host},
		}
		needs := []interface{}{}
		for _, alt := range rt.Needs {
			set := []interface{}{}
			for _, t := range alt {
				set = append(set, string(t))
			}
			needs = append(needs, set)
		}
		cards[key] = map[string]interface{}{
			"type":        "Model",
			"namespace":   rt.Namespace,
			"component":   rt.Component,
			"endpoint":    rt.Endpoint,
			"instance_id": int64(id),
			"card_json": map[string]interface{}{
				"display_name": rt.Model,
				"worker_type":  string(rt.WorkerType),
				"needs":        needs,
			},
		}
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": DWMAPIVersion,
		"kind":       DWMKind,
		"metadata": map[string]interface{}{
			"name":      pod.Name,
			"namespace": pod.Namespace,
			"ownerReferences": []interface{}{map[string]interface{}{
				"apiVersion":         "v1",
				"kind":               "Pod",
				"name":               pod.Name,
				"uid":                string(pod.UID),
				"controller":         true,
				"blockOwnerDeletion": false,
			}},
		},
		"spec": map[string]interface{}{
			"data": map[string]interface{}{
				"endpoints":      endpoints,
				"model_cards":    cards,
				"event_channels": map[string]interface{}{},
			},
		},
	}}
	return u
}

// PodOwnerUID returns the uid of the DWM's first ownerReference of kind Pod, the uid the
// join compares with the endpoint's targetRef uid (daemon/state.rs, reconcile_key (c)).
func PodOwnerUID(u *unstructured.Unstructured) string {
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == "Pod" {
			return string(o.UID)
		}
	}
	return ""
}

// DecodeMetadata decodes a DWM's spec.data into DiscoveryMetadata. spec.data may be a
// JSON object or a string holding one. A missing or null spec.data, a value that is not
// an object, or a record whose "type" tag is wrong does not decode; such an instance is
// invisible (Dynamo would reuse its last valid cache, which a snapshot does not have).
func DecodeMetadata(u *unstructured.Unstructured) (*DiscoveryMetadata, error) {
	if u == nil {
		return nil, fmt.Errorf("nil DWM")
	}
	data, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "data")
	if err != nil || !found || data == nil {
		return nil, fmt.Errorf("DWM %s/%s: spec.data missing or null", u.GetNamespace(), u.GetName())
	}
	var raw []byte
	if s, ok := data.(string); ok {
		raw = []byte(s)
	} else if raw, err = json.Marshal(data); err != nil {
		return nil, fmt.Errorf("DWM %s/%s: spec.data: %w", u.GetNamespace(), u.GetName(), err)
	}
	var md DiscoveryMetadata
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("DWM %s/%s: spec.data: %w", u.GetNamespace(), u.GetName(), err)
	}
	if md.Endpoints == nil {
		md.Endpoints = map[string]EndpointRecord{}
	}
	if md.ModelCards == nil {
		md.ModelCards = map[string]ModelRecord{}
	}
	if md.EventChannels == nil {
		md.EventChannels = map[string]json.RawMessage{}
	}
	for k, e := range md.Endpoints {
		if e.Type != "Endpoint" {
			return nil, fmt.Errorf("DWM %s/%s: endpoints[%q]: type %q, want Endpoint", u.GetNamespace(), u.GetName(), k, e.Type)
		}
	}
	for k, m := range md.ModelCards {
		if m.Type != "Model" {
			return nil, fmt.Errorf("DWM %s/%s: model_cards[%q]: type %q, want Model", u.GetNamespace(), u.GetName(), k, m.Type)
		}
	}
	return &md, nil
}
