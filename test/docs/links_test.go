// Package docs checks the user documentation (README.md, every Markdown file under
// docs/, and charts/*/README.md): every relative link names a file of the repository
// (not a path outside it, such as the design notes that are not shipped), every #anchor
// names a heading of its target, spelled as GitHub spells heading anchors, and every
// external link is a well-formed http(s) URL (not fetched: the tests run offline). And
// CI (.ci/run) runs exactly the README's test command.
package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	// inlineLinkRE is [text](target) or [text](target "title"); an image's
	// ![alt](src) too.
	inlineLinkRE = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefRE is a reference definition: [label]: target.
	refDefRE = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	// autolinkRE is <https://...>.
	autolinkRE = regexp.MustCompile(`<(https?://[^>\s]+)>`)
	// codeSpanRE is inline code, whose text is no link.
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// htmlAnchorRE is an HTML element's id or an <a name>, which anchors link to too.
	htmlAnchorRE = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:id|name)="([^"]+)"`)
	// headingLinkRE is a link inside a heading: GitHub's anchor keeps its text only.
	headingLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// GitHub's anchor: lower case, every character but letters, digits, spaces, '-'
	// and '_' dropped, spaces made '-'.
	anchorDropRE = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// repoRoot is the repository's root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// documents are root's README.md, every .md file under docs/, and charts/*/README.md,
// as paths relative to root.
func documents(root string) ([]string, error) {
	docs := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			docs = append(docs, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	charts, err := filepath.Glob(filepath.Join(root, "charts", "*", "README.md"))
	if err != nil {
		return nil, err
	}
	for _, c := range charts {
		rel, _ := filepath.Rel(root, c)
		docs = append(docs, rel)
	}
	return docs, nil
}

// anchor is GitHub's anchor of a heading's text.
func anchor(heading string) string {
	h := headingLinkRE.ReplaceAllString(heading, "$1")
	return strings.ReplaceAll(anchorDropRE.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
}

// scan returns a Markdown file's links (outside fenced code and inline code) with
// their line numbers, and its anchors: its headings' (a repeated heading's anchor gets
// -1, -2, ... as on GitHub) and its HTML ids.
func scan(path string) (links []link, anchors map[string]bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	anchors = map[string]bool{}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			a := anchor(m[1])
			if k := seen[a]; k > 0 {
				anchors[a+"-"+strconv.Itoa(k)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		text := codeSpanRE.ReplaceAllString(line, "``")
		for _, re := range []*regexp.Regexp{inlineLinkRE, refDefRE, autolinkRE} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				links = append(links, link{line: n, target: m[1]})
			}
		}
	}
	return links, anchors, sc.Err()
}

type link struct {
	line   int
	target string
}

// check returns every broken link of the documents docs (paths relative to root), one
// message each: "<doc>:<line>: link <target>: <why>".
func check(root string, docs []string) ([]string, int, error) {
	var problems []string
	anchorsOf := map[string]map[string]bool{}
	anchorsIn := func(file string) (map[string]bool, error) {
		if a, ok := anchorsOf[file]; ok {
			return a, nil
		}
		_, a, err := scan(file)
		anchorsOf[file] = a
		return a, err
	}
	checked := 0
	for _, doc := range docs {
		path := filepath.Join(root, doc)
		links, anchors, err := scan(path)
		if err != nil {
			return nil, 0, err
		}
		anchorsOf[path] = anchors
		for _, l := range links {
			checked++
			if why := checkLink(root, path, l.target, anchorsIn); why != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %s: %s", doc, l.line, l.target, why))
			}
		}
	}
	return problems, checked, nil
}

// checkLink says what is wrong with target, a link of the document at path ("": nothing).
func checkLink(root, path, target string, anchorsIn func(string) (map[string]bool, error)) string {
	if u, err := url.Parse(target); err == nil && u.Scheme != "" {
		switch {
		case u.Scheme == "mailto":
			return ""
		case u.Scheme != "http" && u.Scheme != "https":
			return "not an http(s) URL"
		case u.Host == "" || strings.HasPrefix(u.Host, ".") || strings.HasSuffix(u.Host, "."):
			return "an http(s) URL without a well-formed host"
		}
		return ""
	} else if err != nil {
		return "not a URL: " + err.Error()
	}
	file, frag, _ := strings.Cut(target, "#")
	file, err := url.PathUnescape(file)
	if err != nil {
		return "not a path: " + err.Error()
	}
	resolved := path
	if file != "" {
		if strings.HasPrefix(file, "/") {
			return "an absolute path (GitHub resolves it against the site, not the repository)"
		}
		resolved = filepath.Clean(filepath.Join(filepath.Dir(path), file))
	}
	if rel, err := filepath.Rel(root, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "leaves the repository"
	}
	if _, err := os.Stat(resolved); err != nil {
		return "no such file"
	}
	if frag == "" || !strings.HasSuffix(resolved, ".md") {
		return ""
	}
	anchors, err := anchorsIn(resolved)
	if err != nil {
		return err.Error()
	}
	if !anchors[frag] {
		return "no heading with anchor #" + frag
	}
	return ""
}

// TestLinks: every link of the repository's documentation resolves.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	docs, err := documents(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md", filepath.Join("docs", "testing.md")} {
		if !slices.Contains(docs, want) {
			t.Fatalf("%s is not among the documents checked: %v", want, docs)
		}
	}
	problems, checked, err := check(root, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d links checked in %d documents", checked, len(docs))
}

// TestCheckFindsBrokenLinks: a repository of three documents with one broken link of
// each kind, and good links beside them; check reports exactly the broken ones.
func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Title\n\n"+
		"[good file](docs/guide.md), [good anchor](docs/guide.md#step-2-run-make-test), [here](#title)\n"+
		"[missing file](docs/gone.md)\n"+
		"[missing anchor](docs/guide.md#step-3)\n"+
		"[outside](../design/notes.md)\n"+
		"![missing image](docs/pic.svg \"a title\")\n"+
		"`[in code](nowhere.md)` and [a good URL](https://github.com/org/repo/issues/1)\n"+
		"```sh\n[in a fence](nowhere.md)\n```\n")
	write("docs/guide.md", "# Guide\n\n## Step 2: run `make test`\n\n"+
		"[back](../README.md#title), [sub](sub/deep.md#deep)\n"+
		"[no host](https:///path) [a scheme](ftp://example.com/x) [absolute](/docs/guide.md)\n"+
		"[ref]: ../README.md#nothing\n")
	write("docs/sub/deep.md", "# Deep\n\n<https://example.com/ok> [up](../../README.md)\n")
	write("charts/c/README.md", "# Chart\n\n[a template](templates/missing.yaml)\n")

	docs, err := documents(root)
	if err != nil {
		t.Fatal(err)
	}
	wantDocs := []string{"README.md", filepath.Join("docs", "guide.md"), filepath.Join("docs", "sub", "deep.md"), filepath.Join("charts", "c", "README.md")}
	if !slices.Equal(docs, wantDocs) {
		t.Fatalf("documents: %v, want %v", docs, wantDocs)
	}
	problems, checked, err := check(root, docs)
	if err != nil {
		t.Fatal(err)
	}
	guide := filepath.Join("docs", "guide.md")
	want := []string{
		"README.md:4: link docs/gone.md: no such file",
		"README.md:5: link docs/guide.md#step-3: no heading with anchor #step-3",
		"README.md:6: link ../design/notes.md: leaves the repository",
		"README.md:7: link docs/pic.svg: no such file",
		guide + ":6: link https:///path: an http(s) URL without a well-formed host",
		guide + ":6: link ftp://example.com/x: not an http(s) URL",
		guide + ":6: link /docs/guide.md: an absolute path (GitHub resolves it against the site, not the repository)",
		guide + ":7: link ../README.md#nothing: no heading with anchor #nothing",
		filepath.Join("charts", "c", "README.md") + ":3: link templates/missing.yaml: no such file",
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if checked != 17 {
		t.Errorf("%d links checked, want 17", checked)
	}
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Benchmark P1 (`make bench`)":                         "benchmark-p1-make-bench",
		"Day 2: `kubectl dgd`":                                "day-2-kubectl-dgd",
		"Moving over from Dynamo's operator":                  "moving-over-from-dynamos-operator",
		"With Helm (`charts/dgd-rollout`)":                    "with-helm-chartsdgd-rollout",
		"Validation (rejected at admission, message ...)":     "validation-rejected-at-admission-message-",
		"Cohorts: a frontend per revision, traffic by weight": "cohorts-a-frontend-per-revision-traffic-by-weight",
		"See [the API](api.md) first":                         "see-the-api-first",
		"snake_case stays":                                    "snake_case-stays",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestCIRunsTheREADMECommand: .ci/run runs exactly the README's test command, make test,
// and the README says that CI runs it.
func TestCIRunsTheREADMECommand(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var commands []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "set ") || strings.HasPrefix(line, "cd ") {
			continue
		}
		commands = append(commands, line)
	}
	if !slices.Equal(commands, []string{"make test"}) {
		t.Errorf(".ci/run runs %q, want exactly [make test]", commands)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, dev, _ := strings.Cut(string(readme), "## For developers")
	if !strings.Contains(dev, "```sh\nmake test ") || !strings.Contains(dev, "CI runs `make test`: `.ci/run` calls exactly it.") {
		t.Error("README.md's For developers no longer gives make test as the test command and says that CI runs it (.ci/run)")
	}
}
