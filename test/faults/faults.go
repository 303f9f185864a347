// Package faults wraps a controller-runtime client so that a configurable share of its
// WRITES fail the way a busy or flaky API server fails them: 500 InternalError, 429
// TooManyRequests and 409 Conflict before the write is applied, and 500 InternalError
// or 504 Timeout after it was (the write committed, its answer lost: the hard case a
// writer must not mistake for a write that did not happen). Reads are never touched.
// Faults are drawn from a seeded generator and counted, so a test can say how many it
// injected and replay a run with the same seed (the order in which concurrent writes
// draw is not fixed, so a replay is close, not exact).
//
// A fault before the write is returned before the request is sent: the server never
// sees it. A fault after commit sends the request, and when the server applied it,
// returns the fault instead of its answer, the caller's object left as it passed it
// (as a client that never read the response). Inject and InjectAfterCommit add
// deterministic one-shot faults for writes a predicate matches, and AfterWrite lets a
// test act between a write reaching the server and the writer seeing the answer (to
// play a human who edits an object right after the operator did).
package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Op is a write verb: create, update, patch, apply, delete or deleteallof.
type Op string

// Write operations.
const (
	OpCreate      Op = "create"
	OpUpdate      Op = "update"
	OpPatch       Op = "patch"
	OpApply       Op = "apply"
	OpDelete      Op = "delete"
	OpDeleteAllOf Op = "deleteallof"
)

// Code is the HTTP status of an injected fault.
type Code int

// The faults this package injects.
const (
	InternalError   Code = 500
	TooManyRequests Code = 429
	Conflict        Code = 409
	// Timeout is the API server's 504 (StatusReasonTimeout): it could not answer in time,
	// the write may have been applied.
	Timeout Code = 504
)

// Write describes one write the client is asked to make.
type Write struct {
	Op Op
	// Subresource is "" for the object itself, "status", "scale"...
	Subresource string
	// Kind of the object ("Deployment", "DynamoGraphDeployment"...), "" if unknown (Apply).
	Kind      string
	Namespace string
	Name      string
}

// String is "patch Deployment ns/name" or "update DynamoGraphDeployment/status ns/name".
func (w Write) String() string {
	k := w.Kind
	if w.Subresource != "" {
		k += "/" + w.Subresource
	}
	return fmt.Sprintf("%s %s %s/%s", w.Op, k, w.Namespace, w.Name)
}

// Config sets what fails.
type Config struct {
	// Rate is the share of eligible writes that fail, from 0 to 1.
	Rate float64
	// Seed seeds the generator that picks which writes fail and with what.
	Seed uint64
	// ConflictShare is the share of injected faults before the write that are 409
	// Conflicts; the rest are split evenly between 500 InternalError and 429
	// TooManyRequests. Zero means a third.
	ConflictShare float64
	// AfterCommitShare is the share of random faults that let the write through and
	// lose its answer (500 or 504, evenly); zero: none.
	AfterCommitShare float64
	// Eligible limits random faults to the writes it accepts; nil accepts every write.
	Eligible func(Write) bool
}

// Stats counts writes and injected faults.
type Stats struct {
	// Writes is every write asked of the client, failed or not.
	Writes int
	// Injected is every fault injected (random and one-shot).
	Injected int
	// AfterCommit counts the faults (of Injected) returned for writes the server applied.
	AfterCommit int
	// ByCode and ByWrite break Injected down by status code and by "op Kind[/sub]";
	// AfterCommitByWrite breaks AfterCommit down by "op Kind[/sub]".
	ByCode             map[Code]int
	ByWrite            map[string]int
	AfterCommitByWrite map[string]int
}

// String summarises the stats on one line.
func (s Stats) String() string {
	var parts []string
	for _, c := range []Code{InternalError, TooManyRequests, Conflict, Timeout} {
		parts = append(parts, fmt.Sprintf("%d×%d", s.ByCode[c], c))
	}
	var ws []string
	for w, n := range s.ByWrite {
		ws = append(ws, fmt.Sprintf("%s: %d (%d after commit)", w, n, s.AfterCommitByWrite[w]))
	}
	sort.Strings(ws)
	return fmt.Sprintf("%d of %d writes failed, %d of them after commit (%s) [%s]", s.Injected, s.Writes, s.AfterCommit, strings.Join(parts, ", "), strings.Join(ws, "; "))
}

// Sub returns s minus an earlier snapshot: what happened in between.
func (s Stats) Sub(earlier Stats) Stats {
	out := Stats{Writes: s.Writes - earlier.Writes, Injected: s.Injected - earlier.Injected, AfterCommit: s.AfterCommit - earlier.AfterCommit,
		ByCode: map[Code]int{}, ByWrite: map[string]int{}, AfterCommitByWrite: map[string]int{}}
	for k, v := range s.ByCode {
		if d := v - earlier.ByCode[k]; d != 0 {
			out.ByCode[k] = d
		}
	}
	for k, v := range s.ByWrite {
		if d := v - earlier.ByWrite[k]; d != 0 {
			out.ByWrite[k] = d
		}
	}
	for k, v := range s.AfterCommitByWrite {
		if d := v - earlier.AfterCommitByWrite[k]; d != 0 {
			out.AfterCommitByWrite[k] = d
		}
	}
	return out
}

// oneShot fails the next n writes match accepts with code, after commit when after.
type oneShot struct {
	match func(Write) bool
	code  Code
	n     int
	after bool
}

// Client is a client.Client whose writes fail as configured. It is safe for
// concurrent use.
type Client struct {
	client.Client

	mu    sync.Mutex
	cfg   Config
	rng   *rand.Rand
	stats Stats
	shots []*oneShot
	after func(context.Context, Write, error)
}

var _ client.Client = (*Client)(nil)

// New wraps c.
func New(c client.Client, cfg Config) *Client {
	return &Client{
		Client: c,
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		stats:  Stats{ByCode: map[Code]int{}, ByWrite: map[string]int{}, AfterCommitByWrite: map[string]int{}},
	}
}

// SetRate changes the share of writes that fail at random (0 turns random faults off;
// one-shot faults still fire).
func (c *Client) SetRate(rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Rate = rate
}

// Rate is the current share of writes that fail at random.
func (c *Client) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Rate
}

// Inject fails the next n writes that match accepts with code, whatever the rate.
func (c *Client) Inject(n int, code Code, match func(Write) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shots = append(c.shots, &oneShot{match: match, code: code, n: n})
}

// InjectAfterCommit lets the next n writes that match accepts through and returns code
// (InternalError or Timeout) instead of the server's answer, whatever the rate.
func (c *Client) InjectAfterCommit(n int, code Code, match func(Write) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shots = append(c.shots, &oneShot{match: match, code: code, n: n, after: true})
}

// Pending is how many one-shot faults have not fired yet.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.shots {
		n += s.n
	}
	return n
}

// ClearInjected drops every one-shot fault that has not fired.
func (c *Client) ClearInjected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shots = nil
}

// AfterWrite calls fn after every write that reached the server, before the writer
// sees the answer (err is the server's). nil removes the hook.
func (c *Client) AfterWrite(fn func(ctx context.Context, w Write, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = fn
}

// Stats returns a copy of the counts so far.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.Sub(Stats{})
}

// describe builds the Write of obj.
func (c *Client) describe(op Op, sub string, obj client.Object) Write {
	w := Write{Op: op, Subresource: sub}
	if obj == nil {
		return w
	}
	w.Namespace, w.Name = obj.GetNamespace(), obj.GetName()
	if gvk, err := c.Client.GroupVersionKindFor(obj); err == nil {
		w.Kind = gvk.Kind
	} else if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		w.Kind = k
	}
	return w
}

// decide counts w and returns the code of the fault to inject (0: none), and whether it
// is returned after the write was applied.
func (c *Client) decide(w Write) (Code, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Writes++
	code, after := Code(0), false
	for i, s := range c.shots {
		if s.match(w) {
			code, after = s.code, s.after
			if s.n--; s.n <= 0 {
				c.shots = append(c.shots[:i], c.shots[i+1:]...)
			}
			break
		}
	}
	if code == 0 && c.cfg.Rate > 0 && (c.cfg.Eligible == nil || c.cfg.Eligible(w)) && c.rng.Float64() < c.cfg.Rate {
		code, after = c.draw()
	}
	return code, after
}

// draw picks a random fault's code and whether it comes after commit.
func (c *Client) draw() (Code, bool) {
	if c.cfg.AfterCommitShare > 0 && c.rng.Float64() < c.cfg.AfterCommitShare {
		if c.rng.Float64() < 0.5 {
			return InternalError, true
		}
		return Timeout, true
	}
	share := c.cfg.ConflictShare
	if share == 0 {
		share = 1.0 / 3
	}
	switch x := c.rng.Float64(); {
	case x < share:
		return Conflict, false
	case x < share+(1-share)/2:
		return InternalError, false
	}
	return TooManyRequests, false
}

// count records one injected fault.
func (c *Client) count(w Write, code Code, after bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Injected++
	c.stats.ByCode[code]++
	key := string(w.Op) + " " + w.Kind
	if w.Subresource != "" {
		key += "/" + w.Subresource
	}
	c.stats.ByWrite[key]++
	if after {
		c.stats.AfterCommit++
		c.stats.AfterCommitByWrite[key]++
	}
}

// errorFor builds the API error a server would return.
func (c *Client) errorFor(code Code, w Write, obj client.Object) error {
	cause := fmt.Errorf("fault injected into %s", w)
	switch code {
	case Conflict:
		return apierrors.NewConflict(c.groupResource(obj, w), w.Name, cause)
	case TooManyRequests:
		return apierrors.NewTooManyRequests(cause.Error(), 1)
	case Timeout:
		return apierrors.NewTimeoutError(cause.Error(), 1)
	default:
		return apierrors.NewInternalError(cause)
	}
}

func (c *Client) groupResource(obj client.Object, w Write) schema.GroupResource {
	gr := schema.GroupResource{Resource: strings.ToLower(w.Kind) + "s"}
	if obj == nil {
		return gr
	}
	gvk, err := c.Client.GroupVersionKindFor(obj)
	if err != nil {
		return gr
	}
	if m, err := c.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	gr.Group = gvk.Group
	return gr
}

// do runs one write through the fault decision and the after hook.
func (c *Client) do(ctx context.Context, op Op, sub string, obj client.Object, write func() error) error {
	w := c.describe(op, sub, obj)
	code, afterCommit := c.decide(w)
	if code != 0 && !afterCommit {
		c.count(w, code, false)
		return c.errorFor(code, w, obj)
	}
	var sent runtime.Object
	if code != 0 && obj != nil {
		sent = obj.DeepCopyObject()
	}
	err := write()
	c.mu.Lock()
	after := c.after
	c.mu.Unlock()
	if after != nil {
		after(ctx, w, err)
	}
	if code == 0 || err != nil {
		return err // no fault, or the server refused the write: its own answer
	}
	// Applied, and the answer lost: the caller's object stays as it sent it.
	if sent != nil {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(sent).Elem())
	}
	c.count(w, code, true)
	return c.errorFor(code, w, obj)
}

// Create implements client.Writer.
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.do(ctx, OpCreate, "", obj, func() error { return c.Client.Create(ctx, obj, opts...) })
}

// Update implements client.Writer.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.do(ctx, OpUpdate, "", obj, func() error { return c.Client.Update(ctx, obj, opts...) })
}

// Patch implements client.Writer.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.do(ctx, OpPatch, "", obj, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

// Apply implements client.Writer.
func (c *Client) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.do(ctx, OpApply, "", nil, func() error { return c.Client.Apply(ctx, obj, opts...) })
}

// Delete implements client.Writer.
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.do(ctx, OpDelete, "", obj, func() error { return c.Client.Delete(ctx, obj, opts...) })
}

// DeleteAllOf implements client.Writer.
func (c *Client) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.do(ctx, OpDeleteAllOf, "", obj, func() error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

// Status implements client.StatusClient: status writes fail like any other write.
func (c *Client) Status() client.SubResourceWriter {
	return &subWriter{c: c, sub: "status", w: c.Client.Status()}
}

// SubResource implements client.SubResourceClientConstructor: subresource writes
// (scale, status...) fail like any other write; reads pass through.
func (c *Client) SubResource(sub string) client.SubResourceClient {
	inner := c.Client.SubResource(sub)
	return &subClient{SubResourceReader: inner, subWriter: subWriter{c: c, sub: sub, w: inner}}
}

type subWriter struct {
	c   *Client
	sub string
	w   client.SubResourceWriter
}

func (s *subWriter) Create(ctx context.Context, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
	return s.c.do(ctx, OpCreate, s.sub, obj, func() error { return s.w.Create(ctx, obj, subObj, opts...) })
}

func (s *subWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.c.do(ctx, OpUpdate, s.sub, obj, func() error { return s.w.Update(ctx, obj, opts...) })
}

func (s *subWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.c.do(ctx, OpPatch, s.sub, obj, func() error { return s.w.Patch(ctx, obj, patch, opts...) })
}

func (s *subWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return s.c.do(ctx, OpApply, s.sub, nil, func() error { return s.w.Apply(ctx, obj, opts...) })
}

type subClient struct {
	client.SubResourceReader
	subWriter
}

var _ client.SubResourceClient = (*subClient)(nil)

// IsInjected reports whether err is a fault this package injected.
func IsInjected(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	return strings.Contains(st.Status().Message, "fault injected into ")
}

// Match helpers for Inject.

// OnKind matches writes of one kind (any op, the object itself or a subresource).
func OnKind(kind string) func(Write) bool {
	return func(w Write) bool { return w.Kind == kind }
}

// On matches writes of op on kind with subresource sub in namespace ns ("" for any).
func On(op Op, kind, sub, ns string) func(Write) bool {
	return func(w Write) bool {
		return w.Op == op && w.Kind == kind && w.Subresource == sub && (ns == "" || w.Namespace == ns)
	}
}
