package backends

import "github.com/dgd-rollout/operator/digest"

// AnnotationTemplateHash records, on a workload, the hash of the template the operator
// rendered for it. Comparing it with a fresh render tells whether a stable workload needs
// an in-place update without tripping over fields the API server defaults.
const AnnotationTemplateHash = "nvidia.com/dgd-template-hash"

// TemplateHash is the digest of a rendered template (digest.Of: the operator's one
// hash over its one canonical encoding).
func TemplateHash[T any](v T) string { return digest.Of(v) }
