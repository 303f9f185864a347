package haproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// eventEvery is the stand-in frontends' time between two SSE events.
const eventEvery = 100 * time.Millisecond

// chatRequest is an OpenAI-style chat completion request; DurationMS (the stand-in's
// own field) is how long a stream lasts, Tokens how long a completion is.
type chatRequest struct {
	Model      string        `json:"model"`
	Messages   []chatMessage `json:"messages"`
	Stream     bool          `json:"stream"`
	DurationMS int           `json:"duration_ms,omitempty"`
	Tokens     int           `json:"max_tokens,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// completion is a non-streamed answer; chunk one SSE event of a stream.
type completion struct {
	Object  string `json:"object"`
	Cohort  string `json:"cohort"`
	Content string `json:"content"`
}

type chunk struct {
	Object string `json:"object"`
	Cohort string `json:"cohort"`
	Seq    int    `json:"seq"`
	Sent   int64  `json:"sent"` // Unix nanoseconds, when the frontend wrote it
	Delta  string `json:"delta"`
}

// cohortHeader tags every answer with the cohort that served it (and so does the body).
const cohortHeader = "X-Dynamo-Cohort"

// receivedHeader is when the frontend received the request (Unix nanoseconds, the
// test's own clock): the proxy routed it between the client's start and then.
const receivedHeader = "X-Received-At"

// frontend is one cohort's stand-in frontend: POST /v1/chat/completions answered as a
// whole JSON body, or as an SSE stream of one event every eventEvery for DurationMS,
// then "data: [DONE]".
type frontend struct {
	cohort   string
	addr     *net.TCPAddr
	srv      *http.Server
	served   atomic.Int64
	inFlight atomic.Int64
}

func startFrontend(tb testing.TB, cohort string) *frontend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &frontend{cohort: cohort, addr: ln.Addr().(*net.TCPAddr)}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	tb.Cleanup(func() { _ = f.srv.Close() })
	return f
}

// content is the text of a completion of n tokens: what the client checks it got whole.
func content(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString("tok" + strconv.Itoa(i) + " ")
	}
	return b.String()
}

func (f *frontend) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	received := time.Now()
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	f.served.Add(1)
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set(cohortHeader, f.cohort)
	w.Header().Set(receivedHeader, strconv.FormatInt(received.UnixNano(), 10))
	if !req.Stream {
		body, _ := json.Marshal(completion{Object: "chat.completion", Cohort: f.cohort, Content: content(req.Tokens)})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher := w.(http.Flusher)
	tick := time.NewTicker(eventEvery)
	defer tick.Stop()
	for seq := 0; seq < req.DurationMS/int(eventEvery/time.Millisecond); seq++ {
		if seq > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
		ev, _ := json.Marshal(chunk{Object: "chat.completion.chunk", Cohort: f.cohort, Seq: seq, Sent: time.Now().UnixNano(), Delta: "tok" + strconv.Itoa(seq) + " "})
		_, _ = fmt.Fprintf(w, "data: %s\n\n", ev)
		flusher.Flush()
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// result is one request as the client saw it.
type result struct {
	start, end time.Time
	// received is when the frontend received it (zero when no answer came): the
	// proxy routed it at some moment between start and received.
	received time.Time
	stream   bool
	pinned   bool   // carried the header route's header
	cohort   string // who answered (header and body agree, or err says otherwise)
	err      error
	lags     []time.Duration // per SSE event: arrival less the frontend's send time
}

// send posts one chat completion to entry and checks the answer is whole: a JSON body
// of the expected content, or every SSE event in order then [DONE]; its header and
// body name one cohort.
func send(ctx context.Context, c *http.Client, entry string, req chatRequest, header http.Header) result {
	body, _ := json.Marshal(req)
	r := result{start: time.Now(), stream: req.Stream}
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+entry+"/v1/chat/completions", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		hr.Header[k] = v
	}
	resp, err := c.Do(hr)
	if err != nil {
		r.err, r.end = err, time.Now()
		return r
	}
	defer resp.Body.Close()
	r.cohort = resp.Header.Get(cohortHeader)
	if ns, err := strconv.ParseInt(resp.Header.Get(receivedHeader), 10, 64); err == nil {
		r.received = time.Unix(0, ns)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(resp.Body)
		r.err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
	case req.Stream:
		r.lags, r.err = readStream(resp.Body, r.cohort, req.DurationMS/int(eventEvery/time.Millisecond))
	default:
		var got completion
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			r.err = fmt.Errorf("body: %w", err)
		} else if got.Cohort != r.cohort || got.Content != content(req.Tokens) {
			r.err = fmt.Errorf("body of cohort %q (header %q) with %d bytes of content, want %d", got.Cohort, r.cohort, len(got.Content), len(content(req.Tokens)))
		}
	}
	r.end = time.Now()
	return r
}

// readStream reads n events of cohort, in order, then [DONE] and the end of the body.
func readStream(body io.Reader, cohort string, n int) ([]time.Duration, error) {
	lags := make([]time.Duration, 0, n)
	sc := bufio.NewScanner(body)
	for seq := 0; ; {
		if !sc.Scan() {
			return lags, fmt.Errorf("stream cut after %d of %d events: %v", seq, n, sc.Err())
		}
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue // the blank line after each event
		}
		if line == "[DONE]" {
			if seq != n {
				return lags, fmt.Errorf("[DONE] after %d of %d events", seq, n)
			}
			if sc.Scan() && sc.Text() != "" || sc.Scan() {
				return lags, errors.New("data after [DONE]")
			}
			return lags, nil
		}
		var ev chunk
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return lags, fmt.Errorf("event %d: %w", seq, err)
		}
		lags = append(lags, time.Since(time.Unix(0, ev.Sent)))
		if ev.Seq != seq || ev.Cohort != cohort {
			return lags, fmt.Errorf("event %d is event %d of cohort %q, the stream's cohort is %q", seq, ev.Seq, ev.Cohort, cohort)
		}
		seq++
	}
}

// newClient is a client of many keep-alive connections, as a frontend's clients are.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 2000, MaxIdleConnsPerHost: 1000, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true}}
}
