// Package haproxy tests the proxy traffic provider (traffic/proxy) against a real
// HAProxy: Debian's haproxy on PATH (the test fails, never skips, without it), started
// with the rendered Deployment's container command; the real agent, the manager binary
// built from this tree and run as `manager proxy-agent` with the rendered container's
// args, authenticated by a token of the rendered ServiceAccount (TokenRequest), so the
// API server authorizes it by the rendered Role alone; a real kube-apiserver (envtest,
// KUBEBUILDER_ASSETS) holding the ConfigMaps, which the test writes as the controller
// does, from the provider's Objects; stand-in frontends answering OpenAI-style
// chat completions, whole or as SSE streams, each answer tagged with its cohort.
// Whether a split is in effect is read from the agents' reports through the
// provider's Effect, never waited for by a sleep. Every process a test starts is
// stopped by its cleanup, and has Pdeathsig SIGKILL besides.
//
//   - TestRollout: two proxy pods, 500 clients, at least 20,000 requests, half of them
//     1-5 s streams, through three weight steps with a header route, an abort, a
//     retry and completion: none failed or cut, each phase's split within 3 points of
//     its weights, every header-pinned request on the candidate, no request begun after
//     a cohort's weight 0 was in effect answered by it, drain reports at most about
//     one a second per pod.
//   - TestStreamPassesThrough: a 5 s stream arrives whole, its events as sent.
//   - TestNoAdminPort: HAProxy and the agent listen on their one TCP port each; the
//     runtime API is a UNIX socket of mode 0600; the probe port changes nothing.
//   - TestHAProxyRestart: a split written while HAProxy is down is served from the
//     first request of the restarted HAProxy; the agent says it cannot apply it
//     meanwhile and is not ready.
//   - TestAPIServerErrors: the agent retries with backoff while the API server is
//     down, HAProxy keeps serving, and the split written meanwhile comes into effect.
//   - TestRoleAsTheAPIServerSees: the API server grants the agent's ServiceAccount
//     what the agent does and nothing next to it.
//   - BenchmarkProxy, BenchmarkWeightChange: latency and throughput added by the
//     proxy; time from a weight change to traffic following it.
package haproxy
