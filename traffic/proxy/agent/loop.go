package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dgd-rollout/operator/traffic/proxy"
	"github.com/dgd-rollout/operator/traffic/proxy/haproxy"
)

// agent is one proxy pod's agent.
type agent struct {
	o        Options
	hap      haproxy.Client
	health   *health
	reporter *reporter
	// written is the version haproxy.cfg holds; applied the version HAProxy was last
	// read back holding in full.
	written, applied string
}

// Backoff of passes that fail (HAProxy unreachable, a command refused): from 200 ms,
// doubling, to 5 s. HAProxy starts right after the agent's startup probe passes, so
// the first passes of a pod are expected to fail for a moment.
const (
	backoffMin = 200 * time.Millisecond
	backoffMax = 5 * time.Second
	// maxRounds bounds the plan-run-read rounds of one pass: a removal takes three
	// (weight 0, maintenance, deletion) when its cohort has nothing in flight.
	maxRounds = 4
)

// run waits for the first desired split, writes HAProxy's configuration (the startup
// probe then passes and the kubelet starts HAProxy), and then runs a pass at every
// change of the desired split, every ReportInterval while a cohort drains, every
// Resync otherwise, and with backoff after a pass that failed.
func (a *agent) run(ctx context.Context, m *mailbox) {
	var cur desired
	for cur.version == "" {
		select {
		case <-ctx.Done():
			return
		case <-m.ready:
		}
		if d, ok := m.take(); ok {
			if d.err != nil {
				a.o.Log.Error(d.err, "desired split")
				continue
			}
			cur = d
		}
	}
	var readErr error
	backoff := backoffMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		a.health.beat()
		select {
		case <-ctx.Done():
			return
		case <-m.ready:
			if d, ok := m.take(); ok {
				if readErr = d.err; d.err == nil {
					cur = d
				}
			}
		case <-timer.C:
		}
		draining, err := a.pass(ctx, cur, readErr)
		next := a.o.Resync
		switch {
		case err != nil:
			a.o.Log.Info("pass failed, retrying", "in", backoff, "error", err.Error())
			next, backoff = backoff, min(2*backoff, backoffMax)
		case draining:
			next, backoff = a.o.ReportInterval, backoffMin
		default:
			backoff = backoffMin
		}
		timer.Reset(next)
	}
}

// pass brings HAProxy to d and offers a report of what it holds after. draining says
// a cohort at weight 0 still serves requests, or a removed cohort's server remains.
func (a *agent) pass(ctx context.Context, d desired, readErr error) (draining bool, err error) {
	if d.version != a.written {
		if err := a.writeConfig(d); err != nil {
			return false, err
		}
		a.written = d.version
		a.health.start()
	}
	st, err := a.converge(ctx, d.split)
	if err != nil {
		a.health.setReady(false)
		a.reporter.offer(a.report(st, d, err, readErr))
		return false, err
	}
	if diff := haproxy.Check(st, d.split); diff != "" {
		err = fmt.Errorf("HAProxy does not hold split %s after the pass: %s", d.version, diff)
	} else {
		a.applied = d.version
	}
	a.health.setReady(err == nil)
	rep := a.report(st, d, err, readErr)
	a.reporter.offer(rep)
	for hash, c := range rep.Cohorts {
		draining = draining || c.Removing || (drains(rep, hash) && c.InFlight > 0)
	}
	return draining, err
}

// writeConfig writes the pin ACL and then haproxy.cfg for d.
func (a *agent) writeConfig(d desired) error {
	if err := writeFile(haproxy.PinPath(a.o.Dir), haproxy.PinFile(d.split)); err != nil {
		return err
	}
	cfg := haproxy.Config(haproxy.Params{Dir: a.o.Dir, Bind: a.o.Bind, DrainTimeout: a.o.DrainTimeout,
		Split: d.split, Version: d.version})
	return writeFile(proxy.ConfigPath(a.o.Dir), cfg)
}

// converge reads HAProxy, runs the plan to want and reads it again, for up to
// maxRounds rounds: until the plan is empty or holds only steps HAProxy just refused.
// It returns the state last read; an error says HAProxy could not be read, or refused
// a step that must not fail.
func (a *agent) converge(ctx context.Context, want proxy.Split) (haproxy.State, error) {
	pin := haproxy.PinPath(a.o.Dir)
	st, err := a.hap.Read(ctx, pin)
	refused := map[string]bool{}
	for round := 0; err == nil && round < maxRounds; round++ {
		var steps []haproxy.Step
		for _, s := range haproxy.Plan(st, want) {
			if !refused[s.Command] || s.Command == "" {
				steps = append(steps, s)
			}
		}
		if len(steps) == 0 {
			break
		}
		stepErr := a.runSteps(ctx, steps, refused)
		if st, err = a.hap.Read(ctx, pin); err == nil && stepErr != nil {
			return st, stepErr
		}
	}
	return st, err
}

// runSteps runs steps in order. HAProxy refusing a step that may fail is noted in
// refused; refusing any other is an error once every step ran (the next pass plans
// again from what HAProxy then holds).
func (a *agent) runSteps(ctx context.Context, steps []haproxy.Step, refused map[string]bool) error {
	var errs []error
	for _, s := range steps {
		if s.ReplacePin {
			if err := a.replacePin(ctx, s.Pattern); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		out, err := a.hap.Run(ctx, s.Command)
		if err != nil {
			return err // the socket: nothing after it would run either
		}
		if !accepted(s.Command, out) {
			refused[s.Command] = true
			if !s.MayFail {
				errs = append(errs, fmt.Errorf("HAProxy refused %q: %s", s.Command, out))
			}
		}
	}
	return errors.Join(errs...)
}

// accepted tells HAProxy's answers that report success: nothing for set, enable and
// disable, "New server registered." for add server, "Server deleted." for del server,
// and for "set server addr" a sentence saying what changed (src/server.c).
func accepted(cmd, out string) bool {
	switch {
	case strings.HasPrefix(cmd, "add server "):
		return strings.Contains(out, "New server registered")
	case strings.HasPrefix(cmd, "del server "):
		return strings.Contains(out, "Server deleted")
	case strings.Contains(cmd, " addr "):
		return strings.Contains(out, "changed") || strings.Contains(out, "no need to change")
	}
	return out == ""
}

// replacePin swaps the pin ACL's entries for pattern in one commit: a request is
// matched against the old entries or the new ones, never against none
// (management.txt "prepare acl", "commit acl").
func (a *agent) replacePin(ctx context.Context, pattern string) error {
	file := haproxy.Escape(haproxy.PinPath(a.o.Dir))
	out, err := a.hap.Run(ctx, "prepare acl "+file)
	if err != nil {
		return err
	}
	_, v, ok := strings.Cut(out, "New version created: ")
	if _, perr := strconv.ParseUint(strings.TrimSpace(v), 10, 32); !ok || perr != nil {
		return fmt.Errorf("HAProxy answered %q to prepare acl %s", out, file)
	}
	ver := "@" + strings.TrimSpace(v) + " "
	cmds := []string{"commit acl " + ver + file}
	if pattern != "" {
		cmds = append([]string{"add acl " + ver + file + " " + haproxy.Escape(pattern)}, cmds...)
	}
	for _, cmd := range cmds {
		if out, err := a.hap.Run(ctx, cmd); err != nil || out != "" {
			return errors.Join(err, fmt.Errorf("HAProxy answered %q to %q", out, cmd))
		}
	}
	return nil
}

// report is what HAProxy holds, as the agent reports it.
func (a *agent) report(st haproxy.State, d desired, passErr, readErr error) proxy.Report {
	cohorts, pinned := haproxy.Observe(st, d.split)
	r := proxy.Report{Version: a.applied, Time: time.Now().UTC(), Cohorts: cohorts, HeaderRoute: pinned}
	if err := errors.Join(readErr, passErr); err != nil {
		r.Error = err.Error()
	}
	return r
}
