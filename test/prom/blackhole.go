package prom

import (
	"net"
	"sync"
)

// Blackhole is a Prometheus that never answers: it accepts every connection on
// 127.0.0.1 and reads nothing from it and writes nothing to it, as a server behind a
// network partition or a wedged Prometheus does (a port with no listener would refuse
// at once, which no client waits for).
type Blackhole struct {
	// URL is http://127.0.0.1:<port>.
	URL string
	l   net.Listener

	mu       sync.Mutex
	conns    []net.Conn
	accepted int
	done     chan struct{}
}

// StartBlackhole listens on a free port of 127.0.0.1.
func StartBlackhole() (*Blackhole, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Blackhole{URL: "http://" + l.Addr().String(), l: l, done: make(chan struct{})}
	go b.accept()
	return b, nil
}

func (b *Blackhole) accept() {
	defer close(b.done)
	for {
		c, err := b.l.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.accepted++
		b.mu.Unlock()
	}
}

// Accepted counts the connections accepted so far.
func (b *Blackhole) Accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.accepted
}

// Close stops listening and closes every connection it holds.
func (b *Blackhole) Close() error {
	err := b.l.Close()
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	return err
}
