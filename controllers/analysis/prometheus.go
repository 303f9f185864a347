package analysis

import (
	"context"
	"errors"
	"fmt"
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

// QueryTimeout bounds one query (Argo Rollouts' default is 30 s; a reconcile waits
// for it, so ours is shorter).
const QueryTimeout = 10 * time.Second

// Prometheus queries a Prometheus server over its HTTP API (/api/v1/query).
type Prometheus struct {
	api promv1.API
}

// NewPrometheus returns a Querier for the Prometheus at address (http://host:port).
func NewPrometheus(address string) (*Prometheus, error) {
	return NewPrometheusWith(address, nil)
}

// NewPrometheusWith is NewPrometheus over rt (TLS and credentials; nil: Go's default
// transport).
func NewPrometheusWith(address string, rt http.RoundTripper) (*Prometheus, error) {
	c, err := api.NewClient(api.Config{Address: address, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %q: %w", address, err)
	}
	return &Prometheus{api: promv1.NewAPI(c)}, nil
}

// Query runs query at time at and returns its single value: a scalar, or the value
// of each sample of a vector (Samples counts them). A range vector is an error.
func (p *Prometheus) Query(ctx context.Context, query string, at time.Time) Result {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	v, _, err := p.api.Query(ctx, query, at, promv1.WithTimeout(QueryTimeout))
	if err != nil {
		return Result{Err: fmt.Errorf("querying Prometheus: %w", err)}
	}
	return resultOf(v)
}

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
