package gangs

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// substitute runs the script of a command substitution with the tiny
// interpreter, and returns its stdout without trailing newlines.
func (sh *shell) substitute(script string) (string, error) {
	if sh.depth > 8 {
		return "", fmt.Errorf("command substitution nested too deep")
	}
	sh.depth++
	defer func() { sh.depth-- }()
	items, err := splitList(script)
	if err != nil {
		return "", err
	}
	var out, pending strings.Builder
	status := 0
	for _, it := range items {
		if it.op != "|" {
			out.WriteString(pending.String())
			pending.Reset()
		}
		if (it.op == "&&" && status != 0) || (it.op == "||" && status == 0) {
			continue
		}
		stdin := ""
		if it.op == "|" {
			stdin = pending.String()
			pending.Reset()
		}
		argv, err := sh.simple(it.text)
		if err != nil {
			return "", err
		}
		o, st, err := builtin(argv, stdin)
		if err != nil {
			return "", fmt.Errorf("$(%s): %w", strings.TrimSpace(script), err)
		}
		pending.WriteString(o)
		status = st
	}
	out.WriteString(pending.String())
	return strings.TrimRight(out.String(), "\n"), nil
}

// builtin runs one modelled command and returns stdout and exit status.
func builtin(argv []string, stdin string) (string, int, error) {
	if len(argv) == 0 {
		return "", 0, nil
	}
	args := argv[1:]
	switch path.Base(argv[0]) {
	case "echo":
		nl := "\n"
		if len(args) > 0 && args[0] == "-n" {
			nl, args = "", args[1:]
		}
		return strings.Join(args, " ") + nl, 0, nil
	case "true", ":":
		return "", 0, nil
	case "false":
		return "", 1, nil
	case "cat":
		if len(args) == 0 {
			return stdin, 0, nil
		}
	case "id":
		if len(args) == 1 && (args[0] == "-u" || args[0] == "-g") {
			return "0\n", 0, nil
		}
	case "[", "test":
		if argv[0] == "[" {
			if len(args) == 0 || args[len(args)-1] != "]" {
				return "", 2, fmt.Errorf("[: missing ]")
			}
			args = args[:len(args)-1]
		}
		ok, err := testExpr(args)
		if err != nil {
			return "", 2, err
		}
		if ok {
			return "", 0, nil
		}
		return "", 1, nil
	case "sed":
		if len(args) == 2 && args[0] == "-e" {
			args = args[1:]
		}
		if len(args) == 1 {
			out, err := sedSubstitute(args[0], stdin)
			return out, 0, err
		}
	case "tr":
		if len(args) == 2 && len(args[0]) == len(args[1]) {
			return strings.Map(func(r rune) rune {
				if k := strings.IndexRune(args[0], r); k >= 0 {
					return rune(args[1][k])
				}
				return r
			}, stdin), 0, nil
		}
	}
	return "", 127, fmt.Errorf("%q: command not modelled by gangs.Shell (sh would report \"not found\" and substitute \"\")", argv)
}

// testExpr evaluates the arguments of `[`/test: s, -n s, -z s, a = b, a != b
// and the integer comparisons -eq -ne -lt -le -gt -ge.
func testExpr(a []string) (bool, error) {
	switch len(a) {
	case 0:
		return false, nil
	case 1:
		return a[0] != "", nil
	case 2:
		switch a[0] {
		case "-n":
			return a[1] != "", nil
		case "-z":
			return a[1] == "", nil
		case "!":
			ok, err := testExpr(a[1:])
			return !ok, err
		}
	case 3:
		switch a[1] {
		case "=", "==":
			return a[0] == a[2], nil
		case "!=":
			return a[0] != a[2], nil
		}
		x, err1 := strconv.ParseInt(strings.TrimSpace(a[0]), 10, 64)
		y, err2 := strconv.ParseInt(strings.TrimSpace(a[2]), 10, 64)
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("test: integer expression expected: %q", a)
		}
		switch a[1] {
		case "-eq":
			return x == y, nil
		case "-ne":
			return x != y, nil
		case "-lt":
			return x < y, nil
		case "-le":
			return x <= y, nil
		case "-gt":
			return x > y, nil
		case "-ge":
			return x >= y, nil
		}
	}
	return false, fmt.Errorf("test: unsupported expression %q", a)
}

// sedSubstitute applies a `s<d>re<d>repl<d>[g]` script to each line of in.
// The regular expression is POSIX basic syntax.
func sedSubstitute(script, in string) (string, error) {
	if len(script) < 4 || script[0] != 's' {
		return "", fmt.Errorf("sed: only s/// is modelled, got %q", script)
	}
	d := script[1]
	var parts []string
	var cur strings.Builder
	for i := 2; i < len(script); i++ {
		switch c := script[i]; {
		case c == '\\' && i+1 < len(script) && script[i+1] == d:
			cur.WriteByte(d)
			i++
		case c == '\\' && i+1 < len(script):
			cur.WriteString(script[i : i+2])
			i++
		case c == d:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if len(parts) != 2 || (cur.Len() > 0 && cur.String() != "g") {
		return "", fmt.Errorf("sed: cannot parse %q", script)
	}
	re, err := regexp.Compile(breToGo(parts[0]))
	if err != nil {
		return "", fmt.Errorf("sed: %w", err)
	}
	global := cur.String() == "g"
	lines := strings.Split(in, "\n")
	for li, line := range lines {
		var b strings.Builder
		last := 0
		for _, m := range re.FindAllStringSubmatchIndex(line, -1) {
			b.WriteString(line[last:m[0]])
			b.WriteString(sedReplacement(parts[1], line, m))
			last = m[1]
			if !global {
				break
			}
		}
		b.WriteString(line[last:])
		lines[li] = b.String()
	}
	return strings.Join(lines, "\n"), nil
}

// breToGo converts a POSIX basic regular expression to Go syntax.
func breToGo(bre string) string {
	var b strings.Builder
	for i := 0; i < len(bre); i++ {
		c := bre[i]
		if c == '\\' && i+1 < len(bre) {
			i++
			switch n := bre[i]; n {
			case '(', ')', '{', '}', '|', '+', '?':
				b.WriteByte(n)
			default:
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			continue
		}
		if strings.IndexByte("(){}|+?", c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// sedReplacement expands &, \1..\9, \n and \<c> in a sed replacement.
func sedReplacement(repl, line string, m []int) string {
	var b strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '&':
			b.WriteString(line[m[0]:m[1]])
		case c == '\\' && i+1 < len(repl):
			i++
			n := repl[i]
			if g := int(n - '0'); isDigit(n) && 2*g+1 < len(m) && m[2*g] >= 0 {
				b.WriteString(line[m[2*g]:m[2*g+1]])
			} else if n == 'n' {
				b.WriteByte('\n')
			} else if !isDigit(n) {
				b.WriteByte(n)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// arith evaluates the inside of $((...)): it expands it first, then computes
// the value. An unset or empty variable counts as 0, as in dash.
func (sh *shell) arith(expr string) (string, error) {
	text, err := sh.quoted(expr, true)
	if err != nil {
		return "", err
	}
	p := &arithParser{s: text, vars: sh.vars}
	v, err := p.expr()
	if err == nil {
		p.skip()
		if p.i < len(p.s) {
			err = fmt.Errorf("unexpected %q", p.s[p.i:])
		}
	}
	if err != nil {
		return "", fmt.Errorf("arithmetic expression %q: %w", text, err)
	}
	return strconv.FormatInt(v, 10), nil
}

type arithParser struct {
	s    string
	i    int
	vars map[string]string
}

func (p *arithParser) skip() {
	for p.i < len(p.s) && isBlank(p.s[p.i]) {
		p.i++
	}
}

func (p *arithParser) expr() (int64, error) {
	v, err := p.term()
	for err == nil {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			break
		}
		op := p.s[p.i]
		p.i++
		var r int64
		if r, err = p.term(); op == '+' {
			v += r
		} else {
			v -= r
		}
	}
	return v, err
}

func (p *arithParser) term() (int64, error) {
	v, err := p.unary()
	for err == nil {
		p.skip()
		if p.i >= len(p.s) || strings.IndexByte("*/%", p.s[p.i]) < 0 {
			break
		}
		op := p.s[p.i]
		p.i++
		var r int64
		if r, err = p.unary(); err != nil {
			break
		}
		switch {
		case op == '*':
			v *= r
		case r == 0:
			err = fmt.Errorf("division by zero")
		case op == '/':
			v /= r
		default:
			v %= r
		}
	}
	return v, err
}

func (p *arithParser) unary() (int64, error) {
	p.skip()
	if p.i >= len(p.s) {
		return 0, fmt.Errorf("expecting primary")
	}
	switch c := p.s[p.i]; {
	case c == '-' || c == '+':
		p.i++
		v, err := p.unary()
		if c == '-' {
			v = -v
		}
		return v, err
	case c == '(':
		p.i++
		v, err := p.expr()
		p.skip()
		if err == nil && (p.i >= len(p.s) || p.s[p.i] != ')') {
			err = fmt.Errorf("missing )")
		}
		p.i++
		return v, err
	case isDigit(c):
		j := p.i
		for j < len(p.s) && isDigit(p.s[j]) {
			j++
		}
		v, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		p.i = j
		return v, err
	case c == '_' || isAlpha(c):
		j := p.i
		for j < len(p.s) && (p.s[j] == '_' || isAlpha(p.s[j]) || isDigit(p.s[j])) {
			j++
		}
		name := p.s[p.i:j]
		p.i = j
		val := strings.TrimSpace(p.vars[name])
		if val == "" {
			return 0, nil
		}
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("illegal number %s=%q", name, val)
		}
		return v, nil
	}
	return 0, fmt.Errorf("expecting primary at %q", p.s[p.i:])
}
