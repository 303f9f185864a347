package backends

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
)

// AnnotationTemplateHash records, on a workload, the hash of the template the operator
// rendered for it. Comparing it with a fresh render tells whether a stable workload needs
// an in-place update without tripping over fields the API server defaults.
const AnnotationTemplateHash = "nvidia.com/dgd-template-hash"

// TemplateHash is a short stable digest of any JSON-serialisable template.
func TemplateHash(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		// Every template the backends render is a plain API struct; Marshal cannot fail.
		panic(fmt.Sprintf("backends: hashing template: %v", err))
	}
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return fmt.Sprintf("%016x", h.Sum64())
}
