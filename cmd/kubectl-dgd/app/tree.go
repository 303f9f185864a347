package app

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// health is how a row of "kubectl dgd get" reads at a glance: its icon and colour.
type tone int

const (
	healthNone tone = iota // no icon: a grouping row
	healthOK
	healthProgressing
	healthPaused
	healthBad
	healthNeutral // scaled down, terminating: neither good nor bad
)

// icons of each health on a terminal, as "kubectl argo rollouts get" draws them
// (pkg/kubectl-argo-rollouts/info: IconOK ✔, IconProgressing ◌, IconPaused ॥, IconBad ✖,
// IconNeutral •).
var healthIcons = map[tone]string{healthOK: "✔", healthProgressing: "◌", healthPaused: "॥", healthBad: "✖", healthNeutral: "•"}

// ANSI colours of each health and tag (argo rollouts' cmd/get colorMapping: green for
// good and stable, yellow for canary, blue for progressing, red for bad).
const (
	ansiRed    = 31
	ansiGreen  = 32
	ansiYellow = 33
	ansiHiBlue = 94
)

var healthColours = map[tone]int{healthOK: ansiGreen, healthProgressing: ansiHiBlue, healthBad: ansiRed}

// Kind symbols on a terminal (argo rollouts' cmd/get: IconRollout ⟳, IconRevision #,
// IconReplicaSet ⧉, IconPod □, IconService ⑃); gangs and cliques get ⊞.
const (
	symbolDGD      = "⟳"
	symbolRevision = "#"
	symbolService  = "⑃"
	symbolWorkload = "⧉"
	symbolGang     = "⊞"
	symbolPod      = "□"
)

// style is how a view is drawn: on a terminal with colour and symbols, or as plain
// ASCII text (a pipe, a file, a CI log; --no-color).
type style struct {
	colour bool
}

var (
	plainStyle    = style{}
	terminalStyle = style{colour: true}
)

// paint wraps s in the ANSI colour code, on a terminal.
func (st style) paint(s string, code int) string {
	if !st.colour || code == 0 || s == "" {
		return s
	}
	return fmt.Sprintf("\x1b[%dm%s\x1b[0m", code, s)
}

// status is a row's status cell: the icon and the word on a terminal, the word alone
// otherwise.
func (st style) status(h tone, word string) cell {
	if word == "" {
		return cell{}
	}
	if !st.colour || healthIcons[h] == "" {
		return cell{text: word}
	}
	return cell{text: healthIcons[h] + " " + word, colour: healthColours[h]}
}

// branches are the tree's drawing: "├──", "│  ", "└──" on a terminal; ASCII otherwise.
func (st style) branches(last bool) (here, below string) {
	switch {
	case st.colour && last:
		return "└──", "   "
	case st.colour:
		return "├──", "│  "
	case last:
		return "`--", "   "
	}
	return "|--", "|  "
}

// node is one row of the tree and its children.
type node struct {
	symbol, name, kind string
	nameColour         int
	tone               tone
	status, age, info  string
	children           []*node
}

func (n *node) add(children ...*node) *node {
	n.children = append(n.children, children...)
	return n
}

// cell is one table cell: its text and, on a terminal, its colour (of the text after
// lead, the tree's drawing, which stays uncoloured).
type cell struct {
	lead, text string
	colour     int
}

// width is the number of characters a reader sees.
func (c cell) width() int { return utf8.RuneCountInString(c.lead + c.text) }

// printTree writes the tree rooted at root as a table NAME KIND STATUS AGE INFO, the
// tree drawn in the NAME column. Columns are padded by the characters a reader sees,
// not by bytes or escape codes (which text/tabwriter would count).
func (st style) printTree(out io.Writer, root *node) {
	rows := [][]cell{{{text: "NAME"}, {text: "KIND"}, {text: "STATUS"}, {text: "AGE"}, {text: "INFO"}}}
	var walk func(n *node, prefix, indent string)
	walk = func(n *node, prefix, indent string) {
		name := n.name
		if st.colour && n.symbol != "" {
			name = n.symbol + " " + name
		}
		rows = append(rows, []cell{{lead: prefix, text: name, colour: n.nameColour}, {text: n.kind},
			st.status(n.tone, n.status), {text: n.age}, {text: n.info}})
		for i, c := range n.children {
			here, below := st.branches(i == len(n.children)-1)
			walk(c, indent+here, indent+below)
		}
	}
	walk(root, "", "")
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], c.width())
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c.lead + st.paint(c.text, c.colour))
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-c.width()+2))
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
}

// printFields writes "Label:  value" lines, the values aligned (kubectl describe's
// layout, as argo rollouts' get prints its header).
func printFields(out io.Writer, fields [][2]string) {
	width := 0
	for _, f := range fields {
		width = max(width, utf8.RuneCountInString(f[0]))
	}
	for _, f := range fields {
		fmt.Fprintf(out, "%s%s%s\n", f[0], strings.Repeat(" ", width-utf8.RuneCountInString(f[0])+2), f[1])
	}
}
