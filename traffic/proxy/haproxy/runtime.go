package haproxy

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Client speaks to HAProxy's runtime API on its UNIX socket, one command per
// connection in non-interactive mode: HAProxy answers and closes the connection
// (management.txt section 9.3), so an answer is everything read until EOF and a
// command never waits on another's output.
type Client struct {
	// Socket is the socket's path.
	Socket string
	// Timeout bounds one command, connection included (5 s when 0).
	Timeout time.Duration
}

// Run sends one command and returns HAProxy's answer, trailing newlines trimmed.
func (c Client) Run(ctx context.Context, cmd string) (string, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return "", fmt.Errorf("runtime API %s: %w", c.Socket, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", fmt.Errorf("runtime API %s: %q: %w", c.Socket, verb(cmd), err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("runtime API %s: %q: %w", c.Socket, verb(cmd), err)
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// verb is a command without its arguments past the object, for error messages.
func verb(cmd string) string {
	f := strings.Fields(cmd)
	return strings.Join(f[:min(len(f), 3)], " ")
}

// Escape makes s one argument of a runtime API command: the CLI splits words on spaces
// and tabs and commands on semicolons, and takes a backslash as escaping the next
// character ("If a command needs to use a semi-colon or a backslash (eg: in a value),
// it must be preceded by a backslash", management.txt section 9.3; src/cli.c
// cli_parse_request unescapes any character after a backslash).
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', ';', ' ', '\t':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Server is one server of the split or pin backend as "show stat" reports it.
type Server struct {
	Backend, Name string
	// Addr is host:port.
	Addr string
	// Weight is the user weight (uweight), the one "set server weight" sets.
	Weight int32
	// Maint: the server is in maintenance (status MAINT...): it takes no request.
	Maint bool
	// InFlight is scur, the streams the server serves now; Idle its idle connections
	// (idle_conn_cur + safe_conn_cur), which "del server" also refuses.
	InFlight, Idle int64
}

// State is what the agent reads back from HAProxy: its cohort servers (in order of
// backend and name) and the pin ACL's patterns.
type State struct {
	Servers []Server
	Pins    []string
}

// Server returns the server name of backend be.
func (s State) Server(be, name string) (Server, bool) {
	for _, srv := range s.Servers {
		if srv.Backend == be && srv.Name == name {
			return srv, true
		}
	}
	return Server{}, false
}

// Read reads the servers of both backends ("show stat -1 4 -1": every proxy, servers
// only) and the pin ACL's entries ("show acl <file>").
func (c Client) Read(ctx context.Context, pinFile string) (State, error) {
	out, err := c.Run(ctx, "show stat -1 4 -1")
	if err != nil {
		return State{}, err
	}
	servers, err := ParseStat(out)
	if err != nil {
		return State{}, err
	}
	acl, err := c.Run(ctx, "show acl "+Escape(pinFile))
	if err != nil {
		return State{}, err
	}
	return State{Servers: servers, Pins: ParseACL(acl)}, nil
}

// ParseStat reads "show stat" CSV (management.txt section 9.1: a header line "# pxname,
// svname,...", one line per object), keeping the servers of the split and pin
// backends.
func ParseStat(out string) ([]Server, error) {
	header, body, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(header, "# ") {
		return nil, fmt.Errorf("show stat: no CSV header in %q", out)
	}
	cols := map[string]int{}
	for i, name := range strings.Split(strings.TrimPrefix(header, "# "), ",") {
		cols[name] = i
	}
	for _, need := range []string{"pxname", "svname", "scur", "status", "addr", "uweight", "idle_conn_cur", "safe_conn_cur"} {
		if _, ok := cols[need]; !ok {
			return nil, fmt.Errorf("show stat: no column %s in %q", need, header)
		}
	}
	r := csv.NewReader(strings.NewReader(body))
	r.FieldsPerRecord = -1
	var servers []Server
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("show stat: %w", err)
		}
		if len(rec) < len(cols) || (rec[cols["pxname"]] != SplitBackend && rec[cols["pxname"]] != PinBackend) {
			continue
		}
		field := func(name string) string { return rec[cols[name]] }
		num := func(name string) int64 { n, _ := strconv.ParseInt(field(name), 10, 64); return n }
		servers = append(servers, Server{Backend: field("pxname"), Name: field("svname"), Addr: field("addr"),
			Weight: int32(num("uweight")), Maint: strings.HasPrefix(field("status"), "MAINT"),
			InFlight: num("scur"), Idle: num("idle_conn_cur") + num("safe_conn_cur")})
	}
	sort.Slice(servers, func(i, j int) bool {
		if servers[i].Backend != servers[j].Backend {
			return servers[i].Backend < servers[j].Backend
		}
		return servers[i].Name < servers[j].Name
	})
	return servers, nil
}

// ParseACL reads "show acl <file>": one entry a line, "<reference> <pattern>".
func ParseACL(out string) []string {
	var pins []string
	for _, line := range strings.Split(out, "\n") {
		if _, pattern, ok := strings.Cut(line, " "); ok {
			pins = append(pins, pattern)
		}
	}
	return pins
}
