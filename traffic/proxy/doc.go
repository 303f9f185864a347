// Package proxy is the proxy traffic provider: an HAProxy Deployment `{entry}-proxy`
// per frontend service (entry is `{dgd}-{frontend}`) that splits the frontend's
// clients between its cohorts by weight, and the agent beside HAProxy that applies
// the split (traffic/proxy/agent). The frontend's stable Service `{entry}` selects the
// proxy's pods (EntrySelector), so clients and Ingresses keep their address.
//
// # Objects
//
// Objects renders, to apply: the agent's ServiceAccount, Role and RoleBinding
// `{entry}-proxy` (Rules: get, list and watch of the desired ConfigMap, get and patch
// of the status ConfigMap, by resourceNames, and nothing else); the desired ConfigMap
// `{entry}-proxy` (the Split as canonical JSON under SplitKey, its Version under
// VersionKey); the Deployment `{entry}-proxy`. To create once: the status ConfigMap
// `{entry}-proxy-status`, which only the agents write. The Deployment's pod template
// does not depend on the split, so a weight change rolls no pod.
//
// # The pod
//
// The agent (`/manager proxy-agent`, the operator's image) is a native sidecar: an
// init container with restartPolicy Always, whose startup probe passes once it has
// written haproxy.cfg for the current split, so HAProxy (`haproxy -db -f
// /run/dgd-proxy/haproxy.cfg`) starts after it, right from its first request. Both
// mount one emptyDir at RunDir: haproxy.cfg, pin.acl (the header route's pattern)
// and haproxy.sock, HAProxy's runtime API. Both run as the same non-root user, with a
// read-only root filesystem, no capability and no privilege escalation; the
// ServiceAccount token is mounted into the agent only.
//
// # Why no admin port is reachable
//
// HAProxy's runtime API has no authentication: whoever reaches it at level admin can
// change weights, add servers and read every counter ("stats socket ... level admin",
// doc/management.txt section 9.3). So it is a UNIX socket only (mode 600, in an
// emptyDir that only this pod's two containers mount: another pod cannot open a file
// of this pod's filesystem), never a TCP listener; HAProxy's configuration has no
// stats page and no other listener than the client port 8000, and HAProxy's master CLI
// is not started. The agent's own port (8081) serves /startz, /readyz and /healthz,
// GET only, and changes nothing. The agent takes the split from the API server alone,
// under a Role that lets it read one ConfigMap and patch another.
//
// # How a change is applied, and how drain is seen
//
// The agent watches the desired ConfigMap (a list and watch with the field selector
// metadata.name=`{entry}-proxy`, the form resourceNames authorizes). At each change it
// rewrites haproxy.cfg (for a restart) and changes the running HAProxy through the
// runtime API, never by a reload: weights with "set server <b>/<s> weight", a new
// cohort with "add server" (HAProxy 2.6's dynamic servers, which start in maintenance,
// then "enable server"), a cohort gone by weight 0 and, once it serves nothing,
// "disable server" and "del server", the header route by an atomic ACL replacement
// (traffic/proxy/haproxy). A cohort at weight 0 takes no new request and finishes its
// requests in flight: HAProxy's scur of its servers ("show stat"), which the agent
// reports every second while it changes.
//
// # Reports
//
// Each agent writes its Report under its pod's name in the status ConfigMap (a JSON
// merge patch of that key): the Version it applied, per cohort the weight in effect
// and the requests in flight, the header route's cohort, an error, a time. It reports
// after every pass that changed what HAProxy applies, and when a draining cohort's
// in-flight count changed, no more than once per second. Effect reads the reports of
// the live pods: the split is in effect once every one reports its version.
package proxy
