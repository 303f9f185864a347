package haproxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The header route of the rollout: its value holds the characters the agent escapes
// twice over (for the regular expression and for the runtime API's parser).
const (
	routeName  = "X-Canary"
	routeValue = `beta;v=1.2,\x`
)

// Header kinds of a request.
const (
	plainRequest = iota
	pinnedRequest
	nearMissRequest // the header route's name with another value: the split decides
)

// load sends chat completions through the proxy pods from many clients, alternating
// one stream (1 to 5 s, an event every 100 ms) and one plain completion, 5% with the
// header route's header (half of those with the name in odd case, which HTTP says is
// the same name) and 2% with the name and another value.
type load struct {
	entries []string
	client  *http.Client
	started atomic.Int64
	stop    atomic.Bool
	mu      sync.Mutex
	results []outcome
	wg      sync.WaitGroup
}

// outcome is one request and the kind of header it carried.
type outcome struct {
	result
	header int
}

func startLoad(entries []string, workers int) *load {
	l := &load{entries: entries, client: newClient()}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go l.worker(w)
	}
	return l
}

func (l *load) worker(w int) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	for i := 0; !l.stop.Load(); i++ {
		req := chatRequest{Model: "stand-in", Messages: []chatMessage{{Role: "user", Content: "Say something."}}, Tokens: 64}
		if (w+i)%2 == 0 {
			req.Stream, req.DurationMS = true, 1000+100*rng.IntN(41)
		}
		header, kind := http.Header{}, plainRequest
		switch p := rng.IntN(100); {
		case p < 5:
			name := routeName
			if p < 2 {
				name = "x-CANARY" // sent as written: Header's keys go on the wire as they are
			}
			header[name], kind = []string{routeValue}, pinnedRequest
		case p < 7:
			header[routeName], kind = []string{routeValue + "0"}, nearMissRequest
		}
		l.started.Add(1)
		r := send(context.Background(), l.client, l.entries[(w+i)%len(l.entries)], req, header)
		l.mu.Lock()
		l.results = append(l.results, outcome{result: r, header: kind})
		l.mu.Unlock()
	}
}

// finish stops starting requests and waits for those in flight to end.
func (l *load) finish() []outcome {
	l.stop.Store(true)
	l.wg.Wait()
	return l.results
}

// waitStarted waits until n more requests than at mark have started.
func (l *load) waitStarted(tb testing.TB, mark, n int64) {
	tb.Helper()
	eventually(tb, 2*time.Minute, fmt.Sprintf("%d requests started", n), func() bool { return l.started.Load()-mark >= n })
}
