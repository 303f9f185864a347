package analysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Querier runs one instant query. It is the only part of an analysis that is not a
// pure function.
type Querier interface {
	Query(ctx context.Context, query string, at time.Time) Result
}

// QueryTimeout bounds one query, from the request to the last byte of the answer
// (Argo Rollouts' default is 30 s; a reconcile waits for it, so ours is shorter). It
// is also sent to Prometheus as the query's own timeout, so the server gives up too.
const QueryTimeout = 10 * time.Second

// MaxResponseBytes caps the answer to one query. An analysis judges one value (a
// scalar, or a vector of one sample), whose answer is a few hundred bytes; a query
// that selects every series of a large metric can answer with gigabytes, which the
// operator would read into memory whole. Past the cap the answer is cut off and the
// query errs (a measurement Error: retried, never counted as a pass).
const MaxResponseBytes = 1 << 20

// Prometheus queries a Prometheus server over its HTTP API (/api/v1/query).
type Prometheus struct {
	api promv1.API
	// Timeout bounds each query (QueryTimeout by default).
	Timeout time.Duration
}

// NewPrometheus returns a Querier for the Prometheus at address (http://host:port).
func NewPrometheus(address string) (*Prometheus, error) {
	return NewPrometheusWith(address, nil)
}

// NewPrometheusWith is NewPrometheus over rt (TLS and credentials; nil: Go's default
// transport). Every answer read through it is capped at MaxResponseBytes.
func NewPrometheusWith(address string, rt http.RoundTripper) (*Prometheus, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	c, err := api.NewClient(api.Config{Address: address, RoundTripper: capResponses{next: rt, max: MaxResponseBytes}})
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %q: %w", address, err)
	}
	return &Prometheus{api: promv1.NewAPI(c), Timeout: QueryTimeout}, nil
}

// Query runs query at time at and returns its single value: a scalar, or the value
// of each sample of a vector (Samples counts them). A range vector is an error.
func (p *Prometheus) Query(ctx context.Context, query string, at time.Time) Result {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = QueryTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, _, err := p.api.Query(ctx, query, at, promv1.WithTimeout(timeout))
	if err != nil {
		return Result{Err: fmt.Errorf("querying Prometheus: %w", err)}
	}
	return resultOf(v)
}

// capResponses is a RoundTripper whose response bodies end in an error after max bytes
// (client_golang reads a whole answer with io.ReadAll before decoding it).
type capResponses struct {
	next http.RoundTripper
	max  int64
}

func (c capResponses) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > c.max {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("Prometheus answered with %d bytes, over the operator's cap of %d: make the query return one value", resp.ContentLength, c.max)
	}
	resp.Body = &cappedBody{body: resp.Body, left: c.max}
	return resp, nil
}

// cappedBody reads at most left bytes of body; one more is an error.
type cappedBody struct {
	body io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }

var errTooLarge = fmt.Errorf("Prometheus's answer is over the operator's cap of %d bytes: cut off; make the query return one value", MaxResponseBytes)

func resultOf(v model.Value) Result {
	switch v := v.(type) {
	case *model.Scalar:
		return Result{Value: float64(v.Value), Samples: 1}
	case model.Vector:
		if len(v) == 0 {
			return Result{}
		}
		return Result{Value: float64(v[0].Value), Samples: len(v)}
	}
	return Result{Err: errors.New("the query returned a " + v.Type().String() + ": only a scalar or an instant vector can be judged")}
}

// NoPrometheus is the Querier of an operator started without --prometheus-url: every
// query errs, so an analysis becomes inconclusive and never passes.
type NoPrometheus struct{}

// Query errs.
func (NoPrometheus) Query(context.Context, string, time.Time) Result {
	return Result{Err: errors.New("the operator has no Prometheus to query (start it with --prometheus-url)")}
}
