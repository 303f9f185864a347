package render

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Frameworks Dynamo wires multinode gangs for.
const (
	FrameworkVLLM   = "vllm"
	FrameworkSGLang = "sglang"
	FrameworkTRTLLM = "trtllm"
)

// frameworkPattern detects a framework from a main container's command line
// (DetectBackendFrameworkFromArgs).
var frameworkPattern = map[string]*regexp.Regexp{
	FrameworkVLLM:   regexp.MustCompile(`python[0-9.]*\s+[^|&;]*-m\s+[^|&;]*dynamo\.vllm[^|&;]*`),
	FrameworkSGLang: regexp.MustCompile(`python[0-9.]*\s+[^|&;]*-m\s+[^|&;]*dynamo\.sglang[^|&;]*`),
	FrameworkTRTLLM: regexp.MustCompile(`python[0-9.]*\s+[^|&;]*-m\s+[^|&;]*dynamo\.trtllm[^|&;]*`),
}

// DetectFramework is a worker's framework: the one its main container's command and
// args name, else spec.backendFramework, else "" (nothing is rewritten). A command
// naming two, or one other than backendFramework, is an error
// (determineBackendFramework).
func DetectFramework(main *corev1.Container, explicit string) (string, error) {
	line := strings.Join(append(append([]string(nil), main.Command...), main.Args...), " ")
	var found []string
	for _, f := range []string{FrameworkVLLM, FrameworkSGLang, FrameworkTRTLLM} {
		if frameworkPattern[f].MatchString(line) {
			found = append(found, f)
		}
	}
	switch {
	case len(found) > 1:
		return "", fmt.Errorf("command names several frameworks (%s)", strings.Join(found, ", "))
	case len(found) == 1 && explicit != "" && explicit != found[0]:
		return "", fmt.Errorf("command runs %s but backendFramework is %q", found[0], explicit)
	case len(found) == 1:
		return found[0], nil
	}
	switch explicit {
	case "", FrameworkVLLM, FrameworkSGLang, FrameworkTRTLLM:
		return explicit, nil
	}
	return "", fmt.Errorf("backendFramework %q is not one of vllm, sglang, trtllm", explicit)
}

// wire rewrites a multinode worker's main container for its role in the gang, per
// framework (backend_vllm.go, backend_sglang.go, backend_trtllm.go), and sets the
// portable aliases last in its env (a user's own replaced), with a Grove worker's rank
// exported by its shell (exportRank). Non-worker components are never rewritten.
func (c Component) wire(t *corev1.PodTemplateSpec, role Role, gang Gang) error {
	if c.kind() != kindWorker || gang == nil {
		return nil
	}
	main := &t.Spec.Containers[0]
	framework, err := DetectFramework(main, c.DGD.Spec.BackendFramework)
	if err != nil {
		return err
	}
	n := int(c.Spec.NodeCount())
	switch framework {
	case FrameworkVLLM:
		err = c.wireVLLM(t, role, gang, n)
	case FrameworkSGLang:
		err = wireSGLang(main, role, gang, n)
	case FrameworkTRTLLM:
		err = c.wireTRTLLM(t, role, gang, n)
	}
	if err != nil {
		return err
	}
	env, shellRank := gang.aliases(role)
	main.Env = append(withoutEnv(main.Env, aliasEnv...), env...)
	if shellRank {
		exportRank(main)
	}
	return nil
}

// withoutEnv is env without the variables named.
func withoutEnv(env []corev1.EnvVar, names ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if !slices.Contains(names, e.Name) {
			out = append(out, e)
		}
	}
	return out
}

// dropProbes removes every probe: a gang's worker pods run no Dynamo runtime to ask.
func dropProbes(main *corev1.Container) {
	main.LivenessProbe, main.ReadinessProbe, main.StartupProbe = nil, nil, nil
}

var pythonCommand = regexp.MustCompile(`^(.*/)?(python\d*(\.\d+)*)$`)

func isShell(command []string) bool {
	return len(command) == 2 && (command[0] == "sh" || command[0] == "/bin/sh" || command[0] == "bash" || command[0] == "/bin/bash") && command[1] == "-c"
}

// injectFlags adds flags to a main container's command line
// (injectFlagsIntoContainerCommand): appended to the args of a python command, or, when
// the flags need a shell, the whole line becomes `sh -c "exec <line> <flags>"`; in a
// shell script they go right after the framework's module name. A command line they
// cannot be put into is an error (Dynamo ignores it silently; the gang would never
// form).
func injectFlags(main *corev1.Container, flags string, needsShell bool, framework string) error {
	if len(main.Command) > 0 && pythonCommand.MatchString(main.Command[0]) {
		if !needsShell {
			main.Args = append(main.Args, strings.Fields(flags)...)
			return nil
		}
		words := append(append([]string(nil), main.Command...), main.Args...)
		main.Command, main.Args = []string{"sh", "-c"}, []string{"exec " + shellJoin(words) + " " + flags}
		return nil
	}
	at := regexp.MustCompile(`(python[0-9.]*\s+[^|&;]*` + regexp.QuoteMeta(framework) + `[^|&;]*?)(\s|$|[|&;])`)
	for i, a := range main.Args {
		if loc := at.FindStringSubmatchIndex(a); loc != nil {
			main.Args[i] = a[:loc[3]] + " " + flags + a[loc[4]:]
			return nil
		}
	}
	return fmt.Errorf("multinode worker: its command %q and args %q run no `python -m dynamo.%s` to give the gang's flags to", main.Command, main.Args, framework)
}

// shellJoin quotes words for `sh -c` (shellQuoteForBashC): a word with a space, quote,
// backslash, brace, bracket, $, backtick or ! is double-quoted with \, ", $ and `
// escaped; others pass bare.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = shellQuote(w)
	}
	return strings.Join(out, " ")
}

func shellQuote(w string) string {
	if w == "" {
		return `""`
	}
	if !strings.ContainsAny(w, " \t\n'\"\\{}[]$`!") {
		return w
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`")
	return `"` + r.Replace(w) + `"`
}

// argValue is the integer after an exact flag token in args, or def
// (getFlagValue: `--flag=value` and short forms are not read, as in Dynamo).
func argValue(args []string, flag string, def int) int {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			var n int
			if _, err := fmt.Sscanf(args[i+1], "%d", &n); err == nil {
				return n
			}
		}
	}
	return def
}

func hasToken(args []string, token string) bool {
	for _, a := range args {
		for _, f := range strings.Fields(a) {
			if f == token {
				return true
			}
		}
	}
	return false
}
