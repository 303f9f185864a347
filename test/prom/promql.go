package prom

import (
	"regexp"
	"strings"
)

// SelectorNames returns the metric name of every vector and range selector of the PromQL
// expression q, in order, splitting q as Prometheus' lexer does (promql/parser/lex.go,
// alike in 2.x and 3.x for what it reads): each identifier that is not a keyword, an
// aggregation, a function (an identifier before "("), a label name (inside {} or the list
// after by, without, on, ignoring, group_left or group_right), nor part of a string, a
// duration or a number; and the value of each __name__="..." or __name__=~"..." matcher.
// A name in quotes inside braces (3.x's UTF-8 names, {"my.metric"}) is not read: 2.42
// refuses it. SelectorNames does not check that q parses: a server does (Server.Check).
//
// For example, sum by (le) (rate(x_bucket{job="a"}[5m])) or vector(0) reads x_bucket.
func SelectorNames(q string) []string {
	var names []string
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '#': // a comment, to the end of the line
			i = indexFrom(q, i, "\n")
		case c == '"' || c == '\'' || c == '`':
			i = skipString(q, i)
		case c == '{':
			end := skipTo(q, i, '}')
			for _, m := range nameMatcher.FindAllStringSubmatch(q[i:end], -1) {
				names = append(names, m[1])
			}
			i = end
		case c == '[': // a range or a subquery's range and step
			i = skipTo(q, i, ']')
		case isDigit(c) || c == '.' && i+1 < len(q) && isDigit(q[i+1]):
			for i < len(q) && (isIdentChar(q[i]) || q[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(q) && isIdentChar(q[i]) {
				i++
			}
			word := q[start:i]
			next := skipSpace(q, i)
			switch lower := strings.ToLower(word); {
			case groupings[lower]:
				if next < len(q) && q[next] == '(' {
					i = skipTo(q, next, ')')
				}
			case keywords[lower] || next < len(q) && q[next] == '(':
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	return names
}

// nameMatcher is a matcher of the metric name that selects by it (= or =~).
var nameMatcher = regexp.MustCompile(`__name__\s*=~?\s*"((?:[^"\\]|\\.)*)"`)

// groupings are the keywords a list of label names in parentheses follows.
var groupings = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true}

// keywords are PromQL's other reserved words (case-insensitive): operators, modifiers,
// aggregations (which a grouping may separate from their "(") and the numbers Inf and NaN.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "atan2": true, "bool": true,
	"offset": true, "start": true, "end": true, "inf": true, "nan": true,
	"sum": true, "avg": true, "count": true, "min": true, "max": true, "group": true, "stddev": true,
	"stdvar": true, "topk": true, "bottomk": true, "count_values": true, "quantile": true,
	"limitk": true, "limit_ratio": true}

// skipTo returns the index after the first close at or after i outside strings, or len(q).
func skipTo(q string, i int, close byte) int {
	for i < len(q) {
		switch q[i] {
		case close:
			return i + 1
		case '"', '\'', '`':
			i = skipString(q, i)
		default:
			i++
		}
	}
	return len(q)
}

// skipString returns the index after the string that starts at i (its quote).
func skipString(q string, i int) int {
	quote := q[i]
	for i++; i < len(q); i++ {
		switch {
		case q[i] == '\\' && quote != '`':
			i++
		case q[i] == quote:
			return i + 1
		}
	}
	return len(q)
}

func indexFrom(q string, i int, sep string) int {
	if j := strings.Index(q[i:], sep); j >= 0 {
		return i + j
	}
	return len(q)
}

func skipSpace(q string, i int) int {
	for i < len(q) && strings.IndexByte(" \t\r\n", q[i]) >= 0 {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }
