package dynamoview

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCheckIsolation(t *testing.T) {
	const base = "myns-dgd"
	// mislabeled runs in the Dynamo namespace of hash aaaaaaaa but carries hash bbbbbbbb:
	// two revisions registering in one namespace.
	mislabeled := decodeWorker("dc-new", base, "aaaaaaaa")
	mislabeled.Labels[LabelWorkerHash] = "bbbbbbbb"
	unlabeled := decodeWorker("dc-unlabeled", base, "aaaaaaaa")
	delete(unlabeled.Labels, LabelWorkerHash)

	cases := []struct {
		name      string
		pods      []corev1.Pod
		dropPods  bool // compute without pods
		wantCount int
		wantText  []string
	}{
		{
			name: "one revision per namespace",
			pods: []corev1.Pod{prefillWorker("pf-0", base, "aaaaaaaa"), decodeWorker("dc-0", base, "aaaaaaaa"),
				decodeWorker("dc-1", base, "bbbbbbbb"), frontendPod("fe-0", base, true)},
		},
		{
			name:      "decode pods of two worker hashes in one namespace",
			pods:      []corev1.Pod{decodeWorker("dc-0", base, "aaaaaaaa"), mislabeled},
			wantCount: 1,
			wantText:  []string{`"myns-dgd-aaaaaaaa"`, "2 worker revisions", "dc-0", "dc-new", "prefill of one generation would discover decode of another"},
		},
		{
			name:      "a missing hash label is a revision of its own",
			pods:      []corev1.Pod{decodeWorker("dc-0", base, "aaaaaaaa"), unlabeled},
			wantCount: 1,
			wantText:  []string{`=""`, "dc-unlabeled"},
		},
		{
			name:      "visible instances whose pods are gone are skipped",
			pods:      []corev1.Pod{decodeWorker("dc-0", base, "aaaaaaaa")},
			dropPods:  true,
			wantCount: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			slices, dwms := healthy(t, tc.pods...)
			pods := tc.pods
			if tc.dropPods {
				pods = nil
			}
			got := CheckIsolation(Compute(pods, slices, dwms))
			if len(got) != tc.wantCount {
				t.Fatalf("CheckIsolation = %q, want %d violations", got, tc.wantCount)
			}
			if tc.wantCount > 0 && !containsAll(strings.Join(got, "\n"), tc.wantText...) {
				t.Errorf("violation %q lacks %q", got, tc.wantText)
			}
		})
	}
}
