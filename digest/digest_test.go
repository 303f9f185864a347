package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// sha8 is the hash every identity of the operator was before this package: 8 hex
// characters of the SHA-256 of json.Marshal.
func sha8(t *testing.T, v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:8]
}

// TestOfIsTheHashOfBefore: for values without invalid UTF-8, the digest is the hash the
// Grove backend named stable templates and cliques by (and revisions hashed their
// templates by), so no identity changes.
func TestOfIsTheHashOfBefore(t *testing.T) {
	pod := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "main", Image: "vllm:v1", Env: []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
	}}}}
	for name, v := range map[string]any{"a pod template": pod, "a service name": "VllmPrefillWorker"} {
		var got string
		switch x := v.(type) {
		case corev1.PodTemplateSpec:
			got = Of(&x)
		case string:
			got = Of(x)
		}
		if want := sha8(t, v); got != want {
			t.Errorf("%s: Of = %s, want %s (sha256 of json.Marshal)", name, got, want)
		}
	}
	if got, want := Of("VllmPrefillWorker"), "d053d450"; got != want {
		t.Errorf("Of(service name) = %s, want %s", got, want)
	}
}

// TestCanonicalIsAFixedPoint: an invalid UTF-8 byte and its round-tripped U+FFFD encode
// alike, so an object and the API server's copy of it hash alike.
func TestCanonicalIsAFixedPoint(t *testing.T) {
	type s struct{ V string }
	a, err := Canonical(s{V: "a\xffb"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonical(s{V: "a\uFFFDb"})
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) || Of(s{V: "a\xffb"}) != Of(s{V: "a\uFFFDb"}) {
		t.Errorf("canonical encodings differ: %q, %q", a, b)
	}
	again, err := Canonical(json.RawMessage(a))
	if err != nil || string(again) != string(a) {
		t.Errorf("not a fixed point: %q -> %q (%v)", a, again, err)
	}
}

// TestCollisions: nil and 0 differ, and the count is part of the digest.
func TestCollisions(t *testing.T) {
	zero, one := int32(0), int32(1)
	set := map[string]bool{WithCollisions("x", nil): true, WithCollisions("x", &zero): true, WithCollisions("x", &one): true}
	if len(set) != 3 {
		t.Errorf("collision counts nil, 0 and 1 give %d distinct digests, want 3", len(set))
	}
}
