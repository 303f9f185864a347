// Package freeport picks TCP ports on 127.0.0.1 for a server that binds them later
// (another process, or a server that takes a port number and not a listener).
//
// A port learnt by listening on port 0 and closing the listener is taken from the
// kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default),
// which every other `listen :0` and every outgoing connection on the machine draws
// from too: between the close and the later bind, another test suite's API server,
// HAProxy or a client connection can take it, and the bind fails with "address
// already in use" (seen: the kubectl-dgd suite's conversion webhook, Dec 2, 2026, two
// suites running beside it). So Pick draws from the 16,384 ports below the ephemeral
// range instead, which nothing allocates by itself, checks each is free by listening
// on it, and never hands out a port twice in one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// span is how many ports below the ephemeral range Pick draws from.
const span = 16384

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Pick returns a TCP port free on 127.0.0.1 now, below the ephemeral range.
func Pick() (int, error) {
	ports, err := PickN(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// PickN returns n distinct such ports.
func PickN(n int) ([]int, error) {
	low := ephemeralLow()
	first := max(1024, low-span)
	mu.Lock()
	defer mu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 100*n {
			return nil, fmt.Errorf("no free TCP port on 127.0.0.1 in %d-%d after %d tries", first, low-1, tries)
		}
		p := first + rand.IntN(low-first)
		if handed[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		_ = l.Close()
		handed[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// /proc/sys/net/ipv4/ip_local_port_range; 32768, Linux's default, elsewhere).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if p, err := strconv.Atoi(f[0]); err == nil && p > 1024+1 {
				return p
			}
		}
	}
	return 32768
}
