package proxy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/dgd-rollout/operator/digest"
	"github.com/dgd-rollout/operator/traffic"
)

// Keys of the desired ConfigMap `{entry}-proxy`.
const (
	// SplitKey holds the Split as canonical JSON (digest.Canonical).
	SplitKey = "split.json"
	// VersionKey holds the Split's Version, the value the agents report back.
	VersionKey = "version"
)

// Split is the desired split an agent applies: what the desired ConfigMap's SplitKey
// holds. Only cohorts with an address are listed.
//
//	{"cohorts":[{"hash":"6d5f7c1a","address":"10.96.12.7","port":8000,"weight":90},
//	            {"hash":"9b0e44f2","address":"10.96.40.3","port":8000,"weight":10}],
//	 "headerRoute":{"name":"x-canary","value":"1","hash":"9b0e44f2"}}
type Split struct {
	// Cohorts in order of hash.
	Cohorts []SplitCohort `json:"cohorts"`
	// HeaderRoute, when set, names one of Cohorts.
	HeaderRoute *SplitHeaderRoute `json:"headerRoute,omitempty"`
}

// SplitCohort is one cohort's server: where HAProxy sends its share.
type SplitCohort struct {
	Hash    string `json:"hash"`
	Address string `json:"address"`
	Port    int32  `json:"port"`
	// Weight is the percent of new requests, 0 to 100 (HAProxy takes 0 to 256,
	// management.txt "set weight").
	Weight int32 `json:"weight"`
}

// SplitHeaderRoute sends every request whose header Name has exactly the value Value
// to the cohort Hash.
type SplitHeaderRoute struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Hash  string `json:"hash"`
}

// Version is the digest of a split (digest.Of): what the desired ConfigMap's
// VersionKey holds and what an agent reports once it applied the split.
func (s Split) Version() string { return digest.Of(s) }

// Pinned is the hash of the header route's cohort, "" without a header route.
func (s Split) Pinned() string {
	if s.HeaderRoute == nil {
		return ""
	}
	return s.HeaderRoute.Hash
}

// The API's own patterns (api/v1alpha1 HeaderRoute): an HTTP field name is a token
// (RFC 9110 section 5.1, tchar), a value visible ASCII without spaces. The agent turns
// both into a regular expression and a runtime API command, so the provider refuses
// anything else rather than trusting that admission ran.
var (
	headerName  = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]{1,256}$`)
	headerValue = regexp.MustCompile(`^[!-~]+$`)
	// cohortHash is what a server name is made of (`c-<hash>`): HAProxy server names
	// take letters, digits, '-', '_', '.' and ':' (configuration.txt section 2.3);
	// worker hashes are 8 lowercase hex characters (digest).
	cohortHash = regexp.MustCompile(`^[a-z0-9]{1,63}$`)
)

// SplitOf is the split t asks for, less its cohorts without an address (returned in
// missing, in order of hash; the header route is left out too when its cohort is).
func SplitOf(t traffic.Traffic) (s Split, missing []traffic.Cohort, err error) {
	s.Cohorts = []SplitCohort{}
	listed := map[string]bool{}
	for _, c := range traffic.Sorted(t.Cohorts) {
		if !cohortHash.MatchString(c.Hash) {
			return Split{}, nil, fmt.Errorf("cohort %q of %s: a hash is 1 to 63 lowercase letters and digits", c.Hash, t.Entry)
		}
		if c.Weight < 0 || c.Weight > 100 {
			return Split{}, nil, fmt.Errorf("cohort %s of %s: weight %d is not a percent", c.Hash, t.Entry, c.Weight)
		}
		if listed[c.Hash] {
			return Split{}, nil, fmt.Errorf("cohort %s of %s is listed twice", c.Hash, t.Entry)
		}
		listed[c.Hash] = true
		if c.Address == "" {
			missing = append(missing, c)
			continue
		}
		if c.Port < 1 || c.Port > 65535 {
			return Split{}, nil, fmt.Errorf("cohort %s of %s: port %d is not a TCP port", c.Hash, t.Entry, c.Port)
		}
		s.Cohorts = append(s.Cohorts, SplitCohort{Hash: c.Hash, Address: c.Address, Port: c.Port, Weight: c.Weight})
	}
	if hr := t.HeaderRoute; hr != nil {
		if !listed[hr.Hash] {
			return Split{}, nil, fmt.Errorf("header route of %s names cohort %q, which is not one of its cohorts", t.Entry, hr.Hash)
		}
		if !headerName.MatchString(hr.Name) || !headerValue.MatchString(hr.Value) || len(hr.Value) > 1024 {
			return Split{}, nil, fmt.Errorf("header route of %s: %q: %q is not an HTTP field name and a visible ASCII value", t.Entry, hr.Name, hr.Value)
		}
		if !cohortMissing(missing, hr.Hash) {
			s.HeaderRoute = &SplitHeaderRoute{Name: hr.Name, Value: hr.Value, Hash: hr.Hash}
		}
	}
	return s, missing, nil
}

func cohortMissing(missing []traffic.Cohort, hash string) bool {
	for _, c := range missing {
		if c.Hash == hash {
			return true
		}
	}
	return false
}

// ParseSplit reads the desired ConfigMap's data, checking that its version is the
// split's own (a torn or hand-edited ConfigMap is refused, not half applied).
func ParseSplit(data map[string]string) (Split, string, error) {
	var s Split
	if err := json.Unmarshal([]byte(data[SplitKey]), &s); err != nil {
		return Split{}, "", fmt.Errorf("key %s: %w", SplitKey, err)
	}
	if v := s.Version(); v != data[VersionKey] {
		return Split{}, "", fmt.Errorf("key %s is %q, the digest of key %s is %q", VersionKey, data[VersionKey], SplitKey, v)
	}
	return s, data[VersionKey], nil
}

// Report is what one agent last applied: the value of its key (its pod's name) in the
// status ConfigMap `{entry}-proxy-status`, written as a JSON merge patch of that key
// alone.
//
//	{"version":"1f3a9c0d","time":"2026-11-27T10:04:05.123456789Z",
//	 "cohorts":{"6d5f7c1a":{"weight":90,"inFlight":12},"9b0e44f2":{"weight":10,"inFlight":1}},
//	 "headerRoute":"9b0e44f2"}
type Report struct {
	// Version is the Version of the split last applied in full ("" before the first).
	Version string `json:"version"`
	// Time is when the agent read HAProxy's state for this report.
	Time time.Time `json:"time"`
	// Cohorts are HAProxy's servers by cohort hash: the weight in effect and the
	// requests in flight (HAProxy's scur of the cohort's servers, "show stat").
	Cohorts map[string]CohortReport `json:"cohorts"`
	// HeaderRoute is the cohort the header route sends to, "" when none is in effect.
	HeaderRoute string `json:"headerRoute,omitempty"`
	// Error says why the newest desired split is not applied, "" when it is.
	Error string `json:"error,omitempty"`
}

// CohortReport is one cohort in a Report.
type CohortReport struct {
	// Weight is the weight in effect (0 for a server in maintenance).
	Weight int32 `json:"weight"`
	// InFlight counts the requests the cohort is serving through this proxy.
	InFlight int64 `json:"inFlight"`
	// Removing: the cohort is not in the applied split; its server drains and is
	// deleted once it serves nothing.
	Removing bool `json:"removing,omitempty"`
}

// ParseReport reads one agent's report.
func ParseReport(s string) (Report, error) {
	var r Report
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Report{}, err
	}
	return r, nil
}
