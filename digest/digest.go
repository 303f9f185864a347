// Package digest is the operator's one hash and its one canonical encoding. Every
// identity the operator derives from content goes through it: a revision's worker and
// graph hashes (revisions.Hash, revisions.GraphHash), a stable workload's template hash
// (backends.TemplateHash), a Grove stable template's hash and a clique's short name.
//
// The canonical encoding of a value is encoding/json's output (struct fields in
// declaration order, map keys sorted) re-encoded once after decoding into the same
// type: the second pass makes it a fixed point of a JSON round trip. encoding/json
// writes an invalid UTF-8 byte as the escape \ufffd but a real U+FFFD as raw bytes, and
// re-formats quantities canonically; without the second pass an object and its
// round-tripped copy (what the API server hands back) could hash apart. For every value
// without such bytes the canonical encoding is json.Marshal's, so hashes taken before
// this package existed (SHA-256 of json.Marshal) are unchanged.
//
// A digest is the first 8 hex characters of the SHA-256 of the canonical encoding,
// followed, for a revision hash with a collision count, by the count as 4
// little-endian bytes (as Kubernetes' ControllerRevision hash appends it). 8 lowercase
// hex characters are what Dynamo's worker hash is (sha256(...)[:8]) and the only worker
// namespace suffix a strict frontend (DYN_NAMESPACE_PREFIX_STRICT) discovers.
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Canonical returns the canonical encoding of v (see the package doc). T must be the
// value's own type (not any): the second pass decodes into it.
func Canonical[T any](v T) ([]byte, error) {
	first, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	var decoded T
	if err := json.Unmarshal(first, &decoded); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", v, err)
	}
	out, err := json.Marshal(decoded)
	if err != nil {
		return nil, fmt.Errorf("re-encoding %T: %w", v, err)
	}
	return out, nil
}

// Of is the digest of v: 8 hex characters of the SHA-256 of its canonical encoding. It
// panics when v cannot be encoded: every value the operator hashes is a plain API
// struct (no channels, funcs or unsupported floats), and a hash that does not identify
// its value must never be handed out.
func Of[T any](v T) string { return WithCollisions(v, nil) }

// WithCollisions is Of with a collision count appended to the hashed bytes when count
// is non-nil (nil and a pointer to 0 give different digests).
func WithCollisions[T any](v T, count *int32) string {
	data, err := Canonical(v)
	if err != nil {
		panic(fmt.Sprintf("digest: %v", err))
	}
	return Bytes(data, count)
}

// Bytes is the digest of bytes already in canonical encoding, with count as in
// WithCollisions.
func Bytes(data []byte, count *int32) string {
	h := sha256.New()
	h.Write(data)
	if count != nil {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(*count))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}
