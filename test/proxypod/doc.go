// Package proxypod runs the traffic proxy's pods (traffic/proxy: the agent, `/manager
// proxy-agent`, and HAProxy) as local processes, as a kubelet would run them, for the
// suites whose cluster starts no container (KWOK in test/e2e and test/bench; envtest in
// test/haproxy):
//
//   - Start runs one pod of a proxy Deployment's pod template: the agent from the
//     manager binary built from this tree, HAProxy from Debian's package, each with its
//     container's command and args as the kubelet would expand them, the emptyDir one
//     temporary directory, every bind address a free loopback port, the API server
//     reached with a token of the pod's ServiceAccount (so the agent has the rendered
//     Role and nothing more); Pod.Stop stops it as a kubelet with the image's
//     STOPSIGNAL would (SIGUSR1, HAProxy's soft stop, then a kill).
//   - Run watches a cluster's pods labelled v1alpha1.LabelTrafficProxy and keeps one
//     such Pod running for every scheduled, live one, stopping it when its pod
//     terminates or goes.
//
// Every process is started by test/cluster's StartChild (its own process group,
// SIGKILLed if the test binary dies) and stopped by the Pod's Stop.
package proxypod
