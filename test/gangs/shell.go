package gangs

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Shell returns the argv that the shell finally execs, for a command that is
// `sh -c <script>`. `/bin/sh`, `bash` and `dash` are accepted too, as are
// combined flags such as `-ec` or `-lc`.
// env is the container environment, for example from [Expand]. For any other command, Shell
// returns a copy of command unchanged.
//
// The script is cut into steps at the top-level list operators `&&`, `||`,
// `;`, `|`, `&` and newline. The step chosen is the LAST one whose command is
// a Python interpreter run with `-m <module>`, or `mpirun`. If no step is like
// that, the last step is chosen (for example `ray start --address=... --block`
// or `/usr/sbin/sshd -D ...`). Only that step is expanded. Earlier steps that only assign
// variables (`A=1`, `export A=1`) are applied first, on a best-effort basis.
// A leading `exec` is removed.
//
// Supported: single and double quotes, backslash escapes, `$VAR`, `${VAR}`,
// `${VAR:-word}` (and `-`, `:+`, `+`, `:=`), `$0..$9` from the extra args
// after the script, `$((expr))` on integers (+ - * / % unary, parentheses,
// variables, nested expansions) and field splitting of unquoted expansions.
// Command substitution `$(...)` and backquotes run a tiny interpreter: `echo`, `sed s///`, `tr`, `cat`,
// `id -u` (reports 0, root, because the image user cannot be known from the spec), `[`/`test`,
// `true`/`false`, joined by `&&`, `||`, `;` and `|`. Any other
// command in a substitution is an error. Unlike sh, which prints "not found"
// and substitutes "", this lets a broken command line surface in [Check].
// Globbing, redirection targets (they are dropped), functions and control flow
// are not supported.
func Shell(command []string, env map[string]string) ([]string, error) {
	if !isShellCommand(command) {
		return append([]string(nil), command...), nil
	}
	if len(command) < 3 {
		return nil, fmt.Errorf("gangs.Shell: %q has no script", command)
	}
	sh := newShell(env, command[3:])
	items, err := splitList(command[2])
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("gangs.Shell: empty script")
	}
	chosen := len(items) - 1
	for i := len(items) - 1; i >= 0; i-- {
		if isLaunchStep(items[i].text) {
			chosen = i
			break
		}
	}
	for _, it := range items[:chosen] {
		sh.applyAssignments(it.text)
	}
	argv, err := sh.simple(items[chosen].text)
	if err != nil {
		return nil, fmt.Errorf("gangs.Shell: step %q: %w", strings.TrimSpace(items[chosen].text), err)
	}
	for len(argv) > 0 && argv[0] == "exec" {
		argv = argv[1:]
	}
	return argv, nil
}

// ShellEnv is the environment the process a `sh -c` command finally execs starts with:
// env, with the variables its script exports before that step (`export A=x`; a plain
// `A=x` stays the shell's). For any other command it is env. A Grove worker's rank is
// exported so (render.Grove: Grove up to v0.1.0-alpha.12 labels no group-wide pod index
// to read it from).
func ShellEnv(command []string, env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	if !isShellCommand(command) || len(command) < 3 {
		return out
	}
	items, err := splitList(command[2])
	if err != nil || len(items) == 0 {
		return out
	}
	chosen := len(items) - 1
	for i := len(items) - 1; i >= 0; i-- {
		if isLaunchStep(items[i].text) {
			chosen = i
			break
		}
	}
	sh := newShell(env, command[3:])
	for _, it := range items[:chosen] {
		for _, name := range sh.applyAssignments(it.text) {
			out[name] = sh.vars[name]
		}
	}
	return out
}

var (
	shellFlagRe  = regexp.MustCompile(`^-[a-z]*c[a-z]*$`)
	pythonRe     = regexp.MustCompile(`^(.*/)?python[0-9.]*$`)
	assignmentRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	redirectRe   = regexp.MustCompile(`^[0-9]*(>>|>&|<&|>|<)`)
)

func isShellCommand(command []string) bool {
	if len(command) < 2 {
		return false
	}
	switch path.Base(command[0]) {
	case "sh", "bash", "dash", "ash":
		return shellFlagRe.MatchString(command[1])
	}
	return false
}

// isLaunchStep reports whether a raw step runs `python -m <module>` or mpirun.
func isLaunchStep(text string) bool {
	words, err := splitWords(text)
	if err != nil {
		return false
	}
	for len(words) > 0 && (words[0] == "exec" || assignmentRe.MatchString(words[0])) {
		words = words[1:]
	}
	if len(words) == 0 {
		return false
	}
	if path.Base(words[0]) == "mpirun" {
		return true
	}
	if pythonRe.MatchString(words[0]) {
		for _, w := range words[1:] {
			if w == "-m" {
				return true
			}
		}
	}
	return false
}

// listItem is one step of a list; op is the operator before it ("" first).
type listItem struct {
	op   string
	text string
}

// splitList cuts a script at top-level list operators, leaving quotes and
// substitutions intact.
func splitList(s string) ([]listItem, error) {
	var items []listItem
	op, start := "", 0
	add := func(end int, next string, width int) int {
		if t := strings.TrimSpace(s[start:end]); t != "" {
			items = append(items, listItem{op: op, text: t})
		}
		op, start = next, min(end+width, len(s))
		return end + width - 1
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"', '\\', '`', '$':
			j, err := scanConstruct(s, i)
			if err != nil {
				return nil, err
			}
			i = j - 1
		case '#':
			if i == start || isBlank(s[i-1]) { // comment up to end of line
				k := i
				for k < len(s) && s[k] != '\n' {
					k++
				}
				i = add(i, ";", k-i+1)
			}
		case '&', '|':
			if i+1 < len(s) && s[i+1] == c {
				i = add(i, string([]byte{c, c}), 2)
			} else if c == '&' && i > 0 && (s[i-1] == '>' || s[i-1] == '<') {
				continue // 2>&1
			} else {
				i = add(i, string(c), 1)
			}
		case ';', '\n':
			i = add(i, ";", 1)
		}
	}
	add(len(s), "", 0)
	return items, nil
}

// splitWords splits a simple command into raw (unexpanded) words.
func splitWords(s string) ([]string, error) {
	var words []string
	start := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isBlank(c) {
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
		switch c {
		case '\'', '"', '\\', '`', '$':
			j, err := scanConstruct(s, i)
			if err != nil {
				return nil, err
			}
			i = j - 1
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// scanConstruct returns the index just past the quote, escape or `$`
// construct that starts at s[i].
func scanConstruct(s string, i int) (int, error) {
	switch s[i] {
	case '\'':
		if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
			return i + j + 2, nil
		}
		return 0, fmt.Errorf("unterminated single quote in %q", s)
	case '\\':
		return min(i+2, len(s)), nil
	case '`':
		for j := i + 1; j < len(s); j++ {
			if s[j] == '\\' {
				j++
			} else if s[j] == '`' {
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated backquote in %q", s)
	case '"':
		for j := i + 1; j < len(s); {
			switch s[j] {
			case '"':
				return j + 1, nil
			case '\\':
				j += 2
			case '$', '`':
				k, err := scanConstruct(s, j)
				if err != nil {
					return 0, err
				}
				j = k
			default:
				j++
			}
		}
		return 0, fmt.Errorf("unterminated double quote in %q", s)
	case '$':
		if i+1 >= len(s) {
			return i + 1, nil
		}
		switch s[i+1] {
		case '(':
			end, err := matchParen(s, i+1)
			return end + 1, err
		case '{':
			for j := i + 2; j < len(s); {
				switch s[j] {
				case '}':
					return j + 1, nil
				case '\'', '"', '\\', '`', '$':
					k, err := scanConstruct(s, j)
					if err != nil {
						return 0, err
					}
					j = k
				default:
					j++
				}
			}
			return 0, fmt.Errorf("unterminated ${ in %q", s)
		}
		return i + 1, nil
	}
	return i + 1, nil
}

// matchParen returns the index of the `)` matching the `(` at s[open].
func matchParen(s string, open int) (int, error) {
	depth := 0
	for j := open; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j, nil
			}
		case '\'', '"', '\\', '`':
			k, err := scanConstruct(s, j)
			if err != nil {
				return 0, err
			}
			j = k - 1
		}
	}
	return 0, fmt.Errorf("unbalanced parentheses in %q", s)
}
