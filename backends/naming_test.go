package backends

import (
	"strings"
	"testing"
)

func TestWorkloadName(t *testing.T) {
	long := strings.Repeat("very-long-graph-name-", 4)
	cases := map[string]struct {
		dgd, service, hash, want string
	}{
		"stable service keeps {dgd}-{service}, lower-cased": {"vllm-disagg", "Frontend", "", "vllm-disagg-frontend"},
		"worker revision appends the hash":                  {"vllm-disagg", "VllmDecodeWorker", "59f76cf9d4", "vllm-disagg-vllmdecodeworker-59f76cf9d4"},
		"characters outside DNS labels become dashes":       {"g", "my_svc.x", "h1", "g-my-svc-x-h1"},
		"a long name keeps its hash and a digest":           {long, "decode", "59f76cf9d4", ""},
		"group names are {dgd}-{hash}":                      {"vllm", "", "abc", "vllm-abc"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := WorkloadName(c.dgd, c.service, c.hash)
			if c.service == "" {
				got = GroupName(c.dgd, c.hash)
			}
			if len(got) > MaxNameLength {
				t.Fatalf("%q is %d characters, more than %d", got, len(got), MaxNameLength)
			}
			if c.want != "" && got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if c.hash != "" && !strings.HasSuffix(got, "-"+c.hash) {
				t.Fatalf("%q lost its hash suffix", got)
			}
		})
	}
	a := WorkloadName(long, "decode-a", "h")
	b := WorkloadName(long, "decode-b", "h")
	if a == b {
		t.Fatalf("distinct long names collide: %q", a)
	}
}
