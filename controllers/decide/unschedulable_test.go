package decide

import "testing"

func TestSchedulerReason(t *testing.T) {
	for in, want := range map[string]string{
		// kube-scheduler 1.36, as the e2e cluster reports it.
		"0/4 nodes are available: 4 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
		"0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unschedulable: }, 2 Insufficient nvidia.com/gpu. preemption: not eligible":                    "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unschedulable: }, 2 Insufficient nvidia.com/gpu",
		"0/2 nodes are available: 2 Insufficient cpu.": "0/2 nodes are available: 2 Insufficient cpu",
	} {
		if got := schedulerReason(in); got != want {
			t.Errorf("schedulerReason(%q) = %q, want %q", in, got, want)
		}
	}
}
