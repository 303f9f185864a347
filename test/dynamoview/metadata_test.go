package dynamoview

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestInstanceID checks the hash against values printed by rustc's std
// `DefaultHasher::new()` over a &str (and the 53-bit mask of hash_pod_name).
func TestInstanceID(t *testing.T) {
	cases := []struct {
		name      string
		full, ids uint64
	}{
		{"", 0x30406ea523c53def, 0x6ea523c53def},
		{"a", 0x719b50b9a4f0e9f3, 0x1b50b9a4f0e9f3},
		{"pod-0", 0x496bcaa6dcfc466d, 0xbcaa6dcfc466d},
		{"llm-0-vllmdecodeworker-0", 0x0939a4f2eb948f63, 0x19a4f2eb948f63},
		{"myns-dgd-decode-7c9f8d2b-abcde", 0x1c241086f863a8d3, 0x41086f863a8d3},
		{"0123456789abcdef0123456789", 0xe16add62ec19dd47, 0xadd62ec19dd47},
	}
	for _, tc := range cases {
		msg := append([]byte(tc.name), 0xFF)
		if got := sipHash13(0, 0, msg); got != tc.full {
			t.Errorf("sipHash13(%q+0xFF) = %x, want %x", tc.name, got, tc.full)
		}
		if got := InstanceID(tc.name); got != tc.ids {
			t.Errorf("InstanceID(%q) = %x, want %x", tc.name, got, tc.ids)
		}
		if InstanceID(tc.name) > 1<<53-1 {
			t.Errorf("InstanceID(%q) exceeds 53 bits", tc.name)
		}
	}
}

func TestMetadataWorker(t *testing.T) {
	pod := prefillWorker("p-0", "myns-dgd", "deadbeef")
	rt, _ := RuntimeOf(&pod)
	u := Metadata(&pod, rt)

	if u.GetAPIVersion() != "nvidia.com/v1alpha1" || u.GetKind() != "DynamoWorkerMetadata" ||
		u.GetName() != "p-0" || u.GetNamespace() != testNs || len(u.GetLabels()) != 0 {
		t.Fatalf("identity wrong: %v", u.Object["metadata"])
	}
	owners := u.GetOwnerReferences()
	if len(owners) != 1 {
		t.Fatalf("ownerReferences = %+v", owners)
	}
	o := owners[0]
	if o.APIVersion != "v1" || o.Kind != "Pod" || o.Name != "p-0" || string(o.UID) != "uid-p-0" ||
		o.Controller == nil || !*o.Controller || o.BlockOwnerDeletion == nil || *o.BlockOwnerDeletion {
		t.Errorf("owner = %+v", o)
	}
	if ch, _, _ := unstructured.NestedMap(u.Object, "spec", "data", "event_channels"); ch == nil || len(ch) != 0 {
		t.Errorf("event_channels = %v, want {}", ch)
	}

	// The object must survive a JSON round trip (as it would through the API server).
	raw, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var back unstructured.Unstructured
	if err := back.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	for name, obj := range map[string]*unstructured.Unstructured{"built": u, "round trip": &back} {
		md, err := DecodeMetadata(obj)
		if err != nil {
			t.Fatalf("%s: DecodeMetadata: %v", name, err)
		}
		id := InstanceID("p-0")
		key := fmt.Sprintf("myns-dgd-deadbeef/prefill/generate/%x", id)
		wantEp := EndpointRecord{Type: "Endpoint", Namespace: "myns-dgd-deadbeef", Component: "prefill", Endpoint: "generate", InstanceID: id}
		ep, ok := md.Endpoints[key]
		ep.Transport = nil
		if !ok || len(md.Endpoints) != 1 || !reflect.DeepEqual(ep, wantEp) {
			t.Errorf("%s: endpoints = %+v, want %s: %+v", name, md.Endpoints, key, wantEp)
		}
		m, ok := md.ModelCards[key]
		if !ok || len(md.ModelCards) != 1 || m.Type != "Model" || m.Namespace != "myns-dgd-deadbeef" ||
			m.Component != "prefill" || m.Endpoint != "generate" || m.InstanceID != id {
			t.Fatalf("%s: model_cards = %+v", name, md.ModelCards)
		}
		card, err := m.Card()
		want := ModelCard{DisplayName: "Qwen/Qwen3-0.6B", WorkerType: WorkerPrefill, Needs: [][]WorkerType{{WorkerDecode}}}
		if err != nil || !reflect.DeepEqual(card, want) {
			t.Errorf("%s: card = %+v (%v), want %+v", name, card, err, want)
		}
	}
}

func TestMetadataFrontendIsEmpty(t *testing.T) {
	pod := frontendPod("fe-0", "myns-dgd", true)
	rt, _ := RuntimeOf(&pod)
	md, err := DecodeMetadata(Metadata(&pod, rt))
	if err != nil || len(md.Endpoints) != 0 || len(md.ModelCards) != 0 {
		t.Errorf("frontend metadata = %+v, %v; want empty maps", md, err)
	}
}

func TestDecodeMetadata(t *testing.T) {
	card := `{"type":"Model","namespace":"n","component":"backend","endpoint":"generate","instance_id":42,"card_json":%s}`
	cases := []struct {
		name    string
		data    interface{} // spec.data; absent when nil and noData
		noData  bool
		wantErr bool
		check   func(*testing.T, *DiscoveryMetadata)
	}{
		{name: "missing spec.data", noData: true, wantErr: true},
		{name: "null spec.data", data: nil, wantErr: true},
		{name: "not an object", data: []interface{}{"x"}, wantErr: true},
		{name: "null maps read as empty", data: map[string]interface{}{"endpoints": nil, "model_cards": nil},
			check: func(t *testing.T, md *DiscoveryMetadata) {
				if md.Endpoints == nil || md.ModelCards == nil || len(md.Endpoints)+len(md.ModelCards) != 0 {
					t.Errorf("got %+v", md)
				}
			}},
		{name: "wrong type tag", data: map[string]interface{}{"endpoints": map[string]interface{}{
			"n/backend/generate/2a": map[string]interface{}{"type": "Model", "namespace": "n"}}}, wantErr: true},
		{name: "string spec.data, string card_json",
			data: fmt.Sprintf(`{"model_cards":{"n/backend/generate/2a":`+card+`}}`, `"{\"display_name\":\"m\"}"`),
			check: func(t *testing.T, md *DiscoveryMetadata) {
				c, err := md.ModelCards["n/backend/generate/2a"].Card()
				if err != nil || c.DisplayName != "m" || c.WorkerType != "" {
					t.Errorf("card = %+v, %v", c, err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": DWMAPIVersion, "kind": DWMKind,
				"metadata": map[string]interface{}{"name": "p", "namespace": testNs}, "spec": map[string]interface{}{}}}
			if !tc.noData {
				u.Object["spec"].(map[string]interface{})["data"] = tc.data
			}
			md, err := DecodeMetadata(u)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, md)
			}
		})
	}
}
