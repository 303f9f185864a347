package render

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// How the kubelet and the shell each expand a container's command line, and how a
// Grove worker's rank gets from one to the other.
//
// The kubelet expands `$(NAME)` in command and args to NAME's value when NAME is a
// variable of the container (its env, envFrom included), leaves it as written
// otherwise, reads `$$` as one `$`, and does nothing else: no arithmetic, no quoting
// (k8s.io/kubernetes third_party/forked/golang/expansion Expand; Kubernetes docs
// "Define Dependent Environment Variables"). The shell then expands `${NAME}` from the
// process env, which holds the same values.

// kubeVar is a kubelet variable reference, $(NAME); varName a variable name.
var (
	kubeVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// shellVars turns the kubelet's $(VAR) references into the shell's ${VAR}, for scripts
// in containers where the referenced variables are defined after ours (Grove's), which
// the kubelet would leave unexpanded (Dynamo's k8sToShellVarSyntax).
func shellVars(s string) string { return kubeVar.ReplaceAllString(s, "$${$1}") }

// groveRankExport is the first command of a Grove worker's shell: its rank is its clique
// pod index plus one (the leader clique, of one pod, is rank 0), as Dynamo's
// GroveMultinodeDeployer.GetNodeRank computes it.
const groveRankExport = "export " + EnvDynamoRank + "=$((GROVE_PCLQ_POD_INDEX + 1)); "

// exportRank gives a Grove worker's process its DYNAMO_RANK, which its pod spec cannot
// hold (Grove.aliases): a main container that runs a shell script (`sh -c <script>`)
// exports it first; any other command line is run by such a shell, `exec`ed after the
// export, with every kubelet reference in it turned into the shell's (kubeToShell), so
// it sees what the kubelet gave it. In the script, the kubelet references to the
// aliases become the shell's: `$(DYNAMO_RANK)` would stay literal (no such variable in
// the pod spec) and then be a command substitution. Worked example: a worker of
// `python3 -m dynamo.vllm --node-rank $(DYNAMO_RANK)` runs
// `sh -c 'export DYNAMO_RANK=$((GROVE_PCLQ_POD_INDEX + 1)); exec python3 -m dynamo.vllm --node-rank "${DYNAMO_RANK}"'`,
// so worker clique pod 1 starts with --node-rank 2 and DYNAMO_RANK=2. A container with
// no command (the image's entrypoint, which cannot be known here) is left alone.
func exportRank(main *corev1.Container) {
	switch {
	case isShell(main.Command) && len(main.Args) > 0:
		main.Args[0] = groveRankExport + aliasRefsToShell(main.Args[0])
	case len(main.Command) > 0:
		words := append(append([]string(nil), main.Command...), main.Args...)
		main.Command, main.Args = []string{"sh", "-c"}, []string{groveRankExport + "exec " + kubeToShell(words)}
	}
}

// aliasRefsToShell rewrites, in a shell script, the kubelet's references to the aliases
// (`$(DYNAMO_RANK)`, `$(DYNAMO_LEADER_ADDRESS)`) as the shell's `${NAME}`, and keeps the
// rest as written. A backslash right before one goes too: it is shellQuote's escape of
// `$` inside double quotes (injectFlags quotes the user's words so), which would keep
// the kubelet's value from the shell (`"\$(DYNAMO_LEADER_ADDRESS)"` became
// `"\llm-0-..."`), where `"${DYNAMO_LEADER_ADDRESS}"` is the address. Text the kubelet
// does not read as a reference (`$$(...)`, or `$(...)` inside `$((...))`, whose name runs
// to the first `)`) is kept.
func aliasRefsToShell(script string) string {
	var b strings.Builder
	for _, p := range kubePieces(script) {
		switch {
		case p.ref && (p.text == EnvDynamoRank || p.text == EnvDynamoLeaderAddress):
			if s := b.String(); strings.HasSuffix(s, `\`) {
				b.Reset()
				b.WriteString(s[:len(s)-1])
			}
			b.WriteString("${" + p.text + "}")
		default:
			b.WriteString(p.raw)
		}
	}
	return b.String()
}

// kubeToShell is a shell command line that runs words as the kubelet would have run
// them: each word quoted for the shell (shellQuote) with every `$` the kubelet must keep
// doubled, and every kubelet reference `$(NAME)` a `"${NAME}"` of the shell. For a
// variable the container does not define the kubelet would have passed `$(NAME)`
// literally where the shell gives "": a command line naming undefined variables is
// broken either way.
func kubeToShell(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" {
			out[i] = `""`
			continue
		}
		var b strings.Builder
		for _, p := range kubePieces(w) {
			if p.ref {
				b.WriteString(`"${` + p.text + `}"`)
				continue
			}
			b.WriteString(strings.ReplaceAll(shellQuote(p.text), "$", "$$"))
		}
		out[i] = b.String()
	}
	return strings.Join(out, " ")
}

// kubePiece is a span of a string as the kubelet's expansion reads it: a reference
// (text is the variable name) or literal text (text as the kubelet passes it on). raw
// is the span as written.
type kubePiece struct {
	text, raw string
	ref       bool
}

// kubePieces splits s the way k8s.io/kubernetes third_party/forked/golang/expansion
// Expand and tryReadVariableName read it: `$$` is a literal `$`; `$(` starts a name that
// runs to the first `)`, a reference when it is a variable name (a name like
// `(GROVE_PCLQ_POD_INDEX + 1`, from `$((...))`, is none: kept literally, as the kubelet
// keeps an undefined one); an unterminated `$(` and any other `$` are literal.
func kubePieces(s string) []kubePiece {
	var out []kubePiece
	lit, raw := "", ""
	flush := func() {
		if raw != "" {
			out = append(out, kubePiece{text: lit, raw: raw})
			lit, raw = "", ""
		}
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] != '$' || i+1 == len(s):
			lit, raw = lit+s[i:i+1], raw+s[i:i+1]
		case s[i+1] == '$':
			lit, raw = lit+"$", raw+"$$"
			i++
		case s[i+1] == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				lit, raw = lit+"$(", raw+"$("
				i++
				continue
			}
			name, span := s[i+2:i+2+end], s[i:i+3+end]
			if varName.MatchString(name) {
				flush()
				out = append(out, kubePiece{text: name, raw: span, ref: true})
			} else {
				lit, raw = lit+span, raw+span
			}
			i += 2 + end
		default:
			lit, raw = lit+"$", raw+"$"
		}
	}
	flush()
	return out
}
