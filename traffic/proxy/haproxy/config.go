// Package haproxy is what the proxy agent knows of HAProxy 2.6: the configuration it
// starts from (Config), its runtime API over a UNIX socket (Client), the servers and
// pin patterns read back from it (State), and the runtime commands that turn one
// State into a split (Plan) and the check that a State is that split (Check).
//
// Each cohort is one server `c-<hash>` in each of two backends: `split`, weighted by
// the cohort's percent, and `pin`, where only the header route's cohort has weight 1.
// The frontend sends a request to `pin` when its headers match the pin ACL's pattern,
// to `split` otherwise. Every change is a runtime command, none a reload: `set server
// <b>/<s> weight`, `add server` / `enable server` (a dynamic server starts in
// maintenance), `disable server` / `del server` once drained, and an atomic
// `prepare acl` / `add acl @<ver>` / `commit acl @<ver>` for the header route
// (haproxy/haproxy v2.6.0 doc/management.txt section 9.3).
package haproxy

import (
	"bytes"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/dgd-rollout/operator/traffic/proxy"
)

// Backend names.
const (
	SplitBackend = "split"
	PinBackend   = "pin"
)

// ServerName is a cohort's server name in both backends.
func ServerName(hash string) string { return "c-" + hash }

// Params are what a configuration is made of.
type Params struct {
	// Dir holds the socket and the pin ACL (the pod's emptyDir).
	Dir string
	// Bind is the listener's address, ":8000" in a pod.
	Bind string
	// DrainTimeout bounds a soft stop (hard-stop-after): how long streams in flight
	// may take once the pod is told to stop.
	DrainTimeout time.Duration
	// Split and its Version are the split the configuration starts on.
	Split   proxy.Split
	Version string
}

// Socket is the runtime API's socket under dir.
func Socket(dir string) string { return path.Join(dir, proxy.SocketFile) }

// PinPath is the pin ACL file under dir.
func PinPath(dir string) string { return path.Join(dir, proxy.PinFile) }

// The timeouts are each longer than any stream a frontend may send: a non-streaming
// completion sends nothing until it is done, and HAProxy's client and server timeouts
// are inactivity timeouts (configuration.txt "timeout client", "timeout server").
// HAProxy buffers no message here (it would with "option http-buffer-request" or a
// "compression" directive, neither used), but it does hold back the end of what it
// forwards while a message expects more: it sends with MSG_MORE (src/stconn.c at
// v2.6.0: CO_SFL_MSG_MORE while htx_expect_more, unless the channel has
// CF_NEVER_WAIT), and Linux then holds a partial segment until more data comes, up to
// 200 ms (tcp(7), TCP_CORK and MSG_MORE). An SSE stream's events arrived one event
// late through HAProxy, 104 ms median and 209 ms at most for events 100 ms apart
// (test/haproxy TestStreamPassesThrough, 0.3 ms without). "option http-no-delay" sets
// CF_NEVER_WAIT on both channels (src/stream.c, PR_O2_NODELAY): configuration.txt
// advises it only for interactive exchanges, which a token stream is.
//
// "tune.pattern.cache-size 0" turns off the per-thread cache of ACL results: it keys a
// result by the input and the ACL's revision, which `add acl` moves and `commit acl`
// does not (nor the purge of an empty old version), so a "no match" cached between the
// agent's add and commit of a header route outlived the commit, and requests of those
// header bytes went by the split for as long as the route stood (src/pattern.c
// pat_match_reg, include/haproxy/pattern.h pat_ref_commit at v2.6.0; test/haproxy
// TestPinNotCachedAcrossCommit). The pin ACL holds one pattern, matched once a request.
var configTemplate = template.Must(template.New("haproxy.cfg").Parse(`# Written by the dgd-rollout proxy agent: split {{.Version}}.
# The agent rewrites this file at every split it applies, so that HAProxy restarts on
# the current split; it changes a running HAProxy through the runtime API alone.
global
    stats socket {{.Socket}} mode 600 level admin
    stats timeout 30s
    maxconn 8192
    tune.pattern.cache-size 0
    hard-stop-after {{.HardStop}}
    log stdout format raw local0 notice

defaults
    mode http
    log global
    option dontlognull
    option http-no-delay
    timeout connect 5s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    timeout http-request 60s
    timeout http-keep-alive 2m
    timeout queue 30s
    timeout client-fin 30s
    timeout server-fin 30s
    retries 3
    option redispatch

frontend entry
    bind {{.Bind}}
    acl pinned req.hdrs -m reg -f {{.Pin}}
    use_backend pin if pinned
    default_backend split

backend split
    balance roundrobin
{{- range .Split}}
    server {{.Name}} {{.Addr}} weight {{.Weight}}
{{- end}}

backend pin
    balance roundrobin
{{- range .Pinned}}
    server {{.Name}} {{.Addr}} weight {{.Weight}}
{{- end}}
`))

type configServer struct {
	Name, Addr string
	Weight     int32
}

// Config renders haproxy.cfg for p.
func Config(p Params) []byte {
	data := struct {
		Version, Socket, Pin, Bind, HardStop string
		Split, Pinned                        []configServer
	}{Version: p.Version, Socket: Socket(p.Dir), Pin: PinPath(p.Dir), Bind: p.Bind,
		HardStop: strconv.FormatInt(max(int64(p.DrainTimeout/time.Second), 1), 10) + "s"}
	for _, c := range p.Split.Cohorts {
		addr := Address(c)
		data.Split = append(data.Split, configServer{ServerName(c.Hash), addr, c.Weight})
		data.Pinned = append(data.Pinned, configServer{ServerName(c.Hash), addr, PinWeight(p.Split, c.Hash)})
	}
	var b bytes.Buffer
	if err := configTemplate.Execute(&b, data); err != nil {
		panic(fmt.Sprintf("haproxy.cfg template: %v", err)) // a fixed template over plain strings
	}
	return b.Bytes()
}

// Address is a cohort's server address, host:port (an IPv6 host in brackets).
func Address(c proxy.SplitCohort) string {
	return net.JoinHostPort(c.Address, strconv.Itoa(int(c.Port)))
}

// PinWeight is a cohort's weight in the pin backend: 1 for the header route's cohort,
// 0 for every other (no new request, configuration.txt "weight").
func PinWeight(s proxy.Split, hash string) int32 {
	if s.Pinned() == hash {
		return 1
	}
	return 0
}

// PinPattern is the pin ACL's pattern for a header route, a PCRE matched against
// req.hdrs: the request's headers as HAProxy holds them, each "name: value\r\n" with
// the name in lower case (src/http_fetch.c smp_fetch_hdrs formats each header with
// h1_format_htx_hdr; htx_add_header stores names lower-cased, ist2bin_lc), the value
// without its surrounding whitespace, and one empty line at the end. So the pattern is
// a whole header line: the start of the block or a line feed, the name, ": ", the
// value, CRLF. Every other character than a letter or a digit is escaped, which PCRE
// reads as that character itself. req.hdrs does not split a value on commas, as
// req.hdr() would (configuration.txt section 7.3.6), so a value with a comma matches
// whole. Case: names match in any case (they are lower-cased before the match), values
// exactly. "" when s has no header route.
func PinPattern(s proxy.Split) string {
	hr := s.HeaderRoute
	if hr == nil {
		return ""
	}
	return `(?:^|\n)` + quoteRegexp(strings.ToLower(hr.Name)) + `:\x20` + quoteRegexp(hr.Value) + `\r\n`
}

func quoteRegexp(s string) string {
	var b strings.Builder
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// PinFile is the pin ACL file's content: the pattern on one line, or nothing.
func PinFile(s proxy.Split) []byte {
	if p := PinPattern(s); p != "" {
		return []byte(p + "\n")
	}
	return nil
}
