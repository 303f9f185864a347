package haproxy_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dgd-rollout/operator/traffic/proxy"
	"github.com/dgd-rollout/operator/traffic/proxy/haproxy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run's output")

const (
	stable    = "6d5f7c1a"
	candidate = "9b0e44f2"
)

// split is stable and candidate at the given weights, with the header route to the
// candidate when pinned.
func split(stableWeight, candidateWeight int32, pinned bool) proxy.Split {
	s := proxy.Split{Cohorts: []proxy.SplitCohort{
		{Hash: stable, Address: "10.96.12.7", Port: 8000, Weight: stableWeight},
		{Hash: candidate, Address: "10.96.40.3", Port: 8000, Weight: candidateWeight},
	}}
	if pinned {
		s.HeaderRoute = &proxy.SplitHeaderRoute{Name: "X-Canary", Value: "1", Hash: candidate}
	}
	return s
}

// TestConfigGolden: the configuration HAProxy starts from, for a 90/10 split with a
// header route (testdata/haproxy.cfg.golden). haproxy -c accepts it (test/haproxy).
func TestConfigGolden(t *testing.T) {
	s := split(90, 10, true)
	got := haproxy.Config(haproxy.Params{Dir: "/run/dgd-proxy", Bind: ":8000", DrainTimeout: time.Hour, Split: s, Version: s.Version()})
	path := filepath.Join("testdata", "haproxy.cfg.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("haproxy.cfg (-golden +got; go test -update rewrites it):\n%s", diff)
	}
}

// TestPinPattern: the pattern matches a header block (req.hdrs: lower-case names,
// "name: value\r\n" lines, an empty line last) exactly when one line is the header
// route's, whatever the value's characters. Go's regexp reads the escapes as PCRE does
// (a backslash before a non-alphanumeric character is that character).
func TestPinPattern(t *testing.T) {
	route := func(name, value string) proxy.Split {
		return proxy.Split{HeaderRoute: &proxy.SplitHeaderRoute{Name: name, Value: value, Hash: candidate}}
	}
	cases := map[string]struct {
		split   proxy.Split
		headers string
		match   bool
	}{
		"the only header":               {route("X-Canary", "1"), "x-canary: 1\r\n\r\n", true},
		"after others":                  {route("X-Canary", "1"), "host: a\r\nx-canary: 1\r\n\r\n", true},
		"another value":                 {route("X-Canary", "1"), "x-canary: 10\r\n\r\n", false},
		"a value that ends like it":     {route("X-Canary", "1"), "x-canary: 01\r\n\r\n", false},
		"a name that ends like it":      {route("X-Canary", "1"), "y-x-canary: 1\r\n\r\n", false},
		"a longer name":                 {route("X-Canary", "1"), "x-canaryy: 1\r\n\r\n", false},
		"in another header's value":     {route("X-Canary", "1"), "via: x-canary: 1\r\n\r\n", false},
		"regexp characters, literally":  {route("x-v", `a.b*c+(d)|[e]^$\f?{2}`), "x-v: a.b*c+(d)|[e]^$\\f?{2}\r\n\r\n", true},
		"a dot is not any character":    {route("x-v", "a.b"), "x-v: axb\r\n\r\n", false},
		"a comma in the value, whole":   {route("x-v", "a,b"), "x-v: a,b\r\n\r\n", true},
		"a comma, one of its parts":     {route("x-v", "a"), "x-v: a,b\r\n\r\n", false},
		"a semicolon and a backslash":   {route("x-v", `v;1\a`), "x-v: v;1\\a\r\n\r\n", true},
		"values are case-sensitive":     {route("x-v", "Beta"), "x-v: beta\r\n\r\n", false},
		"token characters in the name":  {route("X-!#$%&'*+.^_|~", "1"), "x-!#$%&'*+.^_|~: 1\r\n\r\n", true},
		"no header route, no pattern":   {proxy.Split{}, "x-canary: 1\r\n\r\n", false},
		"the empty line does not match": {route("X-Canary", "1"), "\r\n", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := haproxy.PinPattern(c.split)
			if p == "" {
				if c.match {
					t.Fatal("no pattern")
				}
				return
			}
			if got := regexp.MustCompile(p).MatchString(c.headers); got != c.match {
				t.Errorf("%q matches %q: %t, want %t", p, c.headers, got, c.match)
			}
		})
	}
}

// TestEscape: a runtime API argument keeps its backslashes, semicolons and spaces
// through the CLI's unescaping (src/cli.c cli_parse_request: a backslash escapes the
// next character).
func TestEscape(t *testing.T) {
	cases := map[string]string{
		`plain`:            `plain`,
		`a\b`:              `a\\b`,
		`v;1`:              `v\;1`,
		"a b\tc":           "a\\ b\\\tc",
		`(?:^|\n)x\-v\r\n`: `(?:^|\\n)x\\-v\\r\\n`,
	}
	for in, want := range cases {
		if got := haproxy.Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParse reads "show stat" and "show acl" as HAProxy 2.6.12 wrote them
// (testdata/show-stat.csv, with pin/c-aaaa1111 disabled; testdata/show-acl.txt).
func TestParse(t *testing.T) {
	stat, err := os.ReadFile(filepath.Join("testdata", "show-stat.csv"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := haproxy.ParseStat(string(stat))
	if err != nil {
		t.Fatal(err)
	}
	want := []haproxy.Server{
		{Backend: "pin", Name: "c-aaaa1111", Addr: "127.0.0.1:9001", Weight: 0, Maint: true},
		{Backend: "pin", Name: "c-bbbb2222", Addr: "127.0.0.1:9002", Weight: 1},
		{Backend: "split", Name: "c-aaaa1111", Addr: "127.0.0.1:9001", Weight: 90},
		{Backend: "split", Name: "c-bbbb2222", Addr: "127.0.0.1:9002", Weight: 10},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseStat (-want +got):\n%s", diff)
	}
	acl, err := os.ReadFile(filepath.Join("testdata", "show-acl.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`(?:^|\n)x\-canary:\x20v\;1\\a\.b\r\n`}, haproxy.ParseACL(string(acl))); diff != "" {
		t.Errorf("ParseACL (-want +got):\n%s", diff)
	}
	if _, err := haproxy.ParseStat("Unknown command\n"); err == nil {
		t.Error("ParseStat of no CSV: no error")
	}
}
