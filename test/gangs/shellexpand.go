package gangs

import (
	"fmt"
	"strconv"
	"strings"
)

// shell holds the variables of one Shell evaluation.
type shell struct {
	vars  map[string]string
	pos   []string // $0, $1, ...
	depth int      // command-substitution nesting guard
}

func newShell(env map[string]string, pos []string) *shell {
	vars := make(map[string]string, len(env))
	for k, v := range env {
		vars[k] = v
	}
	return &shell{vars: vars, pos: pos}
}

// simple expands one simple command into argv. Leading assignments are
// dropped (they only affect the command's environment). Redirections are dropped too.
func (sh *shell) simple(text string) ([]string, error) {
	words, err := splitWords(text)
	if err != nil {
		return nil, err
	}
	for len(words) > 0 && assignmentRe.MatchString(words[0]) {
		words = words[1:]
	}
	var argv []string
	for i := 0; i < len(words); i++ {
		if m := redirectRe.FindString(words[i]); m != "" {
			if m == words[i] {
				i++ // the target is the next word
			}
			continue
		}
		fields, err := sh.word(words[i])
		if err != nil {
			return nil, err
		}
		argv = append(argv, fields...)
	}
	return argv, nil
}

// applyAssignments applies `A=x` and `export A=x` steps, and returns the names an
// `export` step exported. Failures are ignored (best effort): such a variable stays
// unset.
func (sh *shell) applyAssignments(text string) []string {
	words, err := splitWords(text)
	if err != nil || len(words) == 0 {
		return nil
	}
	export := words[0] == "export"
	if export {
		words = words[1:]
	}
	for _, w := range words {
		if !assignmentRe.MatchString(w) {
			return nil
		}
	}
	var exported []string
	for _, w := range words {
		eq := strings.IndexByte(w, '=')
		if v, err := sh.quoted(w[eq+1:], false); err == nil {
			sh.vars[w[:eq]] = v
			if export {
				exported = append(exported, w[:eq])
			}
		}
	}
	return exported
}

// word expands one raw word into fields: it does parameter, command and
// arithmetic expansion, field splitting of unquoted results, and quote removal.
func (sh *shell) word(raw string) ([]string, error) {
	var fields []string
	var cur strings.Builder
	have := false
	flush := func() {
		if have {
			fields = append(fields, cur.String())
			cur.Reset()
			have = false
		}
	}
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case '\'':
			j, err := scanConstruct(raw, i)
			if err != nil {
				return nil, err
			}
			cur.WriteString(raw[i+1 : j-1])
			have, i = true, j
		case '"':
			j, err := scanConstruct(raw, i)
			if err != nil {
				return nil, err
			}
			v, err := sh.quoted(raw[i+1:j-1], true)
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			have, i = true, j
		case '\\':
			if i+1 < len(raw) && raw[i+1] != '\n' {
				cur.WriteByte(raw[i+1])
				have = true
			}
			i += 2
		case '$', '`':
			v, j, err := sh.dollar(raw, i)
			if err != nil {
				return nil, err
			}
			if j == i+1 && c == '$' { // a lone `$` is literal
				cur.WriteByte('$')
				have = true
			}
			for k := 0; k < len(v); k++ { // unquoted: split on IFS whitespace
				if isBlank(v[k]) {
					flush()
				} else {
					cur.WriteByte(v[k])
					have = true
				}
			}
			i = j
		default:
			cur.WriteByte(c)
			have, i = true, i+1
		}
	}
	flush()
	return fields, nil
}

// quoted expands text as inside double quotes (dq=true), or as an assignment
// value or a ${VAR:-word} word (dq=false, where quotes are removed). It does no field splitting.
func (sh *shell) quoted(text string, dq bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(text); {
		switch c := text[i]; {
		case c == '\\' && i+1 < len(text):
			n := text[i+1]
			if n == '\n' {
				i += 2
				continue
			}
			if !dq || strings.IndexByte("$`\"\\", n) >= 0 {
				b.WriteByte(n)
			} else {
				b.WriteString(text[i : i+2])
			}
			i += 2
		case c == '$' || c == '`':
			v, j, err := sh.dollar(text, i)
			if err != nil {
				return "", err
			}
			if j == i+1 && c == '$' {
				v = "$"
			}
			b.WriteString(v)
			i = j
		case !dq && (c == '\'' || c == '"'):
			j, err := scanConstruct(text, i)
			if err != nil {
				return "", err
			}
			inner := text[i+1 : j-1]
			if c == '"' {
				if inner, err = sh.quoted(inner, true); err != nil {
					return "", err
				}
			}
			b.WriteString(inner)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), nil
}

// dollar expands the `$...` or backquote construct at s[i]. It returns the
// value and the index just past the construct. If the `$` starts nothing,
// next is i+1 and the value is "".
func (sh *shell) dollar(s string, i int) (string, int, error) {
	if s[i] == '`' {
		j, err := scanConstruct(s, i)
		if err != nil {
			return "", 0, err
		}
		inner := strings.NewReplacer("\\`", "`", "\\\\", "\\", "\\$", "$").Replace(s[i+1 : j-1])
		out, err := sh.substitute(inner)
		return out, j, err
	}
	if i+1 >= len(s) {
		return "", i + 1, nil
	}
	switch n := s[i+1]; {
	case n == '(':
		end, err := matchParen(s, i+1)
		if err != nil {
			return "", 0, err
		}
		if i+2 < end && s[i+2] == '(' {
			if inner, err := matchParen(s, i+2); err == nil && inner == end-1 {
				v, err := sh.arith(s[i+3 : inner])
				return v, end + 1, err
			}
		}
		out, err := sh.substitute(s[i+2 : end])
		return out, end + 1, err
	case n == '{':
		j, err := scanConstruct(s, i)
		if err != nil {
			return "", 0, err
		}
		v, err := sh.braced(s[i+2 : j-1])
		return v, j, err
	case n == '_' || isAlpha(n):
		j := i + 1
		for j < len(s) && (s[j] == '_' || isAlpha(s[j]) || isDigit(s[j])) {
			j++
		}
		return sh.vars[s[i+1:j]], j, nil
	case isDigit(n):
		if k := int(n - '0'); k < len(sh.pos) {
			return sh.pos[k], i + 2, nil
		}
		return "", i + 2, nil
	case n == '?':
		return "0", i + 2, nil
	case n == '#':
		return strconv.Itoa(max(len(sh.pos)-1, 0)), i + 2, nil
	}
	return "", i + 1, nil
}

// braced expands the inside of ${...}.
func (sh *shell) braced(expr string) (string, error) {
	if strings.HasPrefix(expr, "#") && len(expr) > 1 {
		return strconv.Itoa(len(sh.vars[expr[1:]])), nil
	}
	name := expr
	for k := 0; k < len(expr); k++ {
		if c := expr[k]; !(c == '_' || isAlpha(c) || isDigit(c)) {
			name = expr[:k]
			break
		}
	}
	if name == "" {
		return "", fmt.Errorf("bad substitution ${%s}", expr)
	}
	val, set := sh.vars[name]
	if isDigit(name[0]) {
		k, _ := strconv.Atoi(name)
		set = k < len(sh.pos)
		if set {
			val = sh.pos[k]
		}
	}
	rest := expr[len(name):]
	if rest == "" {
		return val, nil
	}
	colon := strings.HasPrefix(rest, ":")
	rest = strings.TrimPrefix(rest, ":")
	if rest == "" {
		return "", fmt.Errorf("bad substitution ${%s}", expr)
	}
	word := func() (string, error) { return sh.quoted(rest[1:], false) }
	empty := !set || (colon && val == "")
	switch rest[0] {
	case '-':
		if empty {
			return word()
		}
		return val, nil
	case '=':
		if empty {
			w, err := word()
			sh.vars[name] = w
			return w, err
		}
		return val, nil
	case '+':
		if empty {
			return "", nil
		}
		return word()
	}
	return "", fmt.Errorf("unsupported substitution ${%s}", expr)
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
