package conversion

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Annotations that carry what the other version cannot hold, as Dynamo's conversion
// writes them (deploy/operator/api/v1alpha1/dynamographdeployment_conversion.go): on a
// v1beta1 object, AnnotationSpec holds a sparse v1alpha1 spec (what v1beta1 cannot
// represent of the v1alpha1 object it came from); on a v1alpha1 object, a sparse
// v1beta1 spec. AnnotationStatus holds a v1alpha1 status; this operator's own status
// needs none (both versions hold the same fields), so it is kept as given.
const (
	annotationPrefix = "nvidia.com/dgd-"
	AnnotationSpec   = annotationPrefix + "spec"
	AnnotationStatus = annotationPrefix + "status"
)

// IsConversionAnnotation reports whether key is reserved for conversion bookkeeping
// (the prefix nvidia.com/dgd-, as Dynamo reserves it).
func IsConversionAnnotation(key string) bool { return strings.HasPrefix(key, annotationPrefix) }

// payloadVersion is the envelope's version, Dynamo's.
const payloadVersion = 1

// envelope is Dynamo's spec payload: {"version":1,"spec":<sparse spec>,"rawJSON":[...]}.
// rawJSON records put raw JSON back at a path of spec (Dynamo keeps EPP plugin
// parameters so); this operator keeps those fields verbatim and writes none.
type envelope struct {
	Version int             `json:"version"`
	Spec    json.RawMessage `json:"spec,omitempty"`
	RawJSON []rawRecord     `json:"rawJSON,omitempty"`
}

type rawRecord struct {
	Path string          `json:"path"`
	Raw  json.RawMessage `json:"raw,omitempty"`
	Nil  bool            `json:"nil,omitempty"`
}

// marshalPayload encodes spec in the envelope.
func marshalPayload(spec any) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encoding conversion payload: %w", err)
	}
	out, err := json.Marshal(envelope{Version: payloadVersion, Spec: raw})
	if err != nil {
		return "", fmt.Errorf("encoding conversion payload: %w", err)
	}
	return string(out), nil
}

// unmarshalPayload decodes a spec payload into out: the envelope, or (Dynamo's legacy
// form) a bare spec. It reports false for a payload it cannot read, which conversion
// then ignores (a reserved annotation a user set is parsed best-effort, as Dynamo does).
func unmarshalPayload(data string, out any) bool {
	if data == "" {
		return false
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &probe); err != nil {
		return false
	}
	spec := json.RawMessage(data)
	if s, ok := probe["spec"]; ok {
		var env envelope
		if err := json.Unmarshal([]byte(data), &env); err != nil {
			return false
		}
		spec = s
		if len(env.RawJSON) > 0 {
			var tree any
			if err := json.Unmarshal(spec, &tree); err != nil {
				return false
			}
			for _, r := range env.RawJSON {
				var v any
				if !r.Nil {
					if err := json.Unmarshal(r.Raw, &v); err != nil {
						continue
					}
				}
				tree = setPath(tree, strings.Split(r.Path, "/"), v)
			}
			b, err := json.Marshal(tree)
			if err != nil {
				return false
			}
			spec = b
		}
	}
	return json.Unmarshal(spec, out) == nil
}

// setPath sets the value at path (object keys and list indexes) of tree, creating
// objects on the way; a path through a missing list index is ignored.
func setPath(tree any, path []string, v any) any {
	if len(path) == 0 {
		return v
	}
	switch t := tree.(type) {
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(t) {
			return tree
		}
		t[i] = setPath(t[i], path[1:], v)
		return t
	case map[string]any:
		t[path[0]] = setPath(t[path[0]], path[1:], v)
		return t
	default:
		return setPath(map[string]any{}, path, v)
	}
}
