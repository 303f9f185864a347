package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Ports are distinct, below the ephemeral range, and free: each can be listened on.
func TestPickN(t *testing.T) {
	low := ephemeralLow()
	ports, err := PickN(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p >= low || p < 1024 || seen[p] {
			t.Fatalf("port %d: outside [1024, %d) or handed twice (%v)", p, low, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		_ = l.Close()
	}
}

// A port listened on, or handed out before, is never handed out.
func TestPickSkipsTakenPorts(t *testing.T) {
	p, err := Pick()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 200 {
		q, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if q == p {
			t.Fatalf("port %d handed out while listened on", p)
		}
	}
}
