package gangs

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// Expand returns what the kubelet would run for container in pod: the
// container's command followed by its args, with `$(VAR)` references expanded,
// plus the resolved environment.
//
// The env is resolved in declaration order, as in kubelet makeEnvironmentVariables
// (k8s.io/kubernetes@v1.36.2 pkg/kubelet/kubelet_pods.go:840-966):
//   - A non-empty literal `value` is expanded against the variables defined
//     earlier in the list. A later definition of the same name replaces the
//     earlier one.
//   - `valueFrom.fieldRef` resolves metadata.name, metadata.namespace,
//     metadata.uid, metadata.labels['k'], metadata.annotations['k'],
//     metadata.labels, metadata.annotations, spec.nodeName,
//     spec.serviceAccountName, status.podIP(s) and status.hostIP(s) from the
//     pod object. status.hostIP comes from pod.status, because there is no node
//     here. Any other field path is an error, as it is in the kubelet.
//   - secretKeyRef, configMapKeyRef, resourceFieldRef, fileKeyRef and envFrom
//     need objects this package does not have. Those variables are left
//     undefined, so references to them stay literal.
//   - Service-link variables are not modelled.
//
// Command and args are then expanded against the complete env
// (pkg/kubelet/container/helpers.go:265-281). An empty command means the image
// entrypoint, which cannot be known. In that case only the expanded args are returned.
func Expand(pod *corev1.Pod, container *corev1.Container) (command []string, env map[string]string, err error) {
	if pod == nil || container == nil {
		return nil, nil, fmt.Errorf("gangs.Expand: nil pod or container")
	}
	env = map[string]string{}
	for _, ev := range container.Env {
		switch {
		case ev.Value != "":
			env[ev.Name] = ExpandString(ev.Value, env)
		case ev.ValueFrom == nil:
			env[ev.Name] = ""
		case ev.ValueFrom.FieldRef != nil:
			v, ferr := fieldRefValue(pod, ev.ValueFrom.FieldRef.FieldPath)
			if ferr != nil {
				return nil, nil, fmt.Errorf("pod %s/%s container %s env %s: %w", pod.Namespace, pod.Name, container.Name, ev.Name, ferr)
			}
			env[ev.Name] = v
		default:
			// Needs a Secret, ConfigMap, node allocatable or volume: not modelled.
		}
	}
	for _, c := range container.Command {
		command = append(command, ExpandString(c, env))
	}
	for _, a := range container.Args {
		command = append(command, ExpandString(a, env))
	}
	return command, env, nil
}

// ExpandString expands `$(VAR)` references in input using vars. It ports
// k8s.io/kubernetes third_party/forked/golang/expansion/expand.go Expand and
// MappingFuncFor, and follows that code exactly:
//   - `$$` becomes `$`;
//   - `$(NAME)` becomes vars[NAME] when NAME is defined, and stays `$(NAME)`
//     otherwise;
//   - NAME is everything up to the FIRST `)`. So `$(( 8 * $(X) ))` reads the
//     name `( 8 * $(X`, which is undefined, and the whole text is kept. The
//     kubelet therefore never expands a `$(X)` nested inside `$((...))`;
//   - an unterminated `$(` and a `$` followed by any other character are kept.
func ExpandString(input string, vars map[string]string) string {
	var buf strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] == '$' && cursor+1 < len(input) {
			buf.WriteString(input[checkpoint:cursor])
			read, isVar, advance := tryReadVariableName(input[cursor+1:])
			if isVar {
				if v, ok := vars[read]; ok {
					buf.WriteString(v)
				} else {
					buf.WriteString("$(" + read + ")")
				}
			} else {
				buf.WriteString(read)
			}
			cursor += advance
			checkpoint = cursor + 1
		}
	}
	return buf.String() + input[checkpoint:]
}

// tryReadVariableName is a copy of the forked expansion package's function of the same name.
func tryReadVariableName(input string) (string, bool, int) {
	r, size := utf8.DecodeRuneInString(input)
	switch r {
	case '$':
		return input[0:size], false, size
	case '(':
		for i := 1; i < len(input); i++ {
			if input[i] == ')' {
				return input[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	default:
		return "$" + string(r), false, size
	}
}

// fieldRefValue follows kubelet podFieldSelectorRuntimeValue
// (pkg/kubelet/kubelet_pods.go:989-1028) and pkg/fieldpath ExtractFieldPathAsString.
// A missing label or annotation key gives "".
func fieldRefValue(pod *corev1.Pod, path string) (string, error) {
	if p, key, ok := splitSubscript(path); ok {
		switch p {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support subscript", path)
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		if len(pod.Status.PodIPs) > 0 {
			return pod.Status.PodIPs[0].IP, nil
		}
		return pod.Status.PodIP, nil
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		if len(ips) == 0 && pod.Status.PodIP != "" {
			ips = append(ips, pod.Status.PodIP)
		}
		return strings.Join(ips, ","), nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		ips := make([]string, 0, len(pod.Status.HostIPs))
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		if len(ips) == 0 && pod.Status.HostIP != "" {
			ips = append(ips, pod.Status.HostIP)
		}
		return strings.Join(ips, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", path)
}

// splitSubscript mirrors pkg/fieldpath SplitMaybeSubscriptedPath.
func splitSubscript(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return fieldPath, "", false
	}
	return parts[0], parts[1], true
}

// formatMap mirrors pkg/fieldpath FormatMap: sorted `k="v"` lines.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}
