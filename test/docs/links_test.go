// Package docs checks the user documentation: every relative link of README.md and
// docs/*.md names a file of the repository (not a path outside it, such as the design
// notes that are not shipped), and every #anchor names a heading of its target, spelled
// as GitHub spells heading anchors.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	linkRE = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	// GitHub's anchor: lower case, every character but letters, digits, spaces, '-'
	// and '_' dropped, spaces made '-'.
	anchorDropRE = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// documents are README.md and docs/*.md.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root(t), "README.md")}, docs...)
}

// scan returns a markdown file's links (outside fenced code) and its headings' anchors
// (a repeated heading's anchor gets -1, -2, ... as on GitHub).
func scan(t *testing.T, path string) (links []string, anchors map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors = map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if strings.HasPrefix(line, "#") {
			h := strings.TrimSpace(strings.TrimLeft(line, "#"))
			a := strings.ReplaceAll(anchorDropRE.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
			if n := seen[a]; n > 0 {
				anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return links, anchors
}

func TestRelativeLinksResolve(t *testing.T) {
	r := root(t)
	anchorsOf := map[string]map[string]bool{}
	checked := 0
	for _, doc := range documents(t) {
		links, anchors := scan(t, doc)
		anchorsOf[doc] = anchors
		rel, _ := filepath.Rel(r, doc)
		for _, l := range links {
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			checked++
			target, anchor, _ := strings.Cut(l, "#")
			file := doc
			if target != "" {
				file = filepath.Clean(filepath.Join(filepath.Dir(doc), target))
			}
			if fr, err := filepath.Rel(r, file); err != nil || strings.HasPrefix(fr, "..") {
				t.Errorf("%s: link %q leaves the repository", rel, l)
				continue
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: link %q: no such file", rel, l)
				continue
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			targetAnchors, ok := anchorsOf[file]
			if !ok {
				_, targetAnchors = scan(t, file)
				anchorsOf[file] = targetAnchors
			}
			if !targetAnchors[anchor] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", rel, l, anchor, target)
			}
		}
	}
	t.Logf("%d relative links checked in %d documents", checked, len(documents(t)))
}
