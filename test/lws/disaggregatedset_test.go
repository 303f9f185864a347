package lws_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/lws"
)

// TestDisaggregatedSetOption runs the Runner with Options.DisaggregatedSet: the
// validating configuration gains vdisaggregatedset.kb.io, the webhook rejects a
// partition, and a DisaggregatedSet of two roles (1 group x 2 pods each) gets one
// labelled LeaderWorkerSet per role with its group Ready; Stop deletes the
// configurations.
func TestDisaggregatedSetOption(t *testing.T) {
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		t.Skipf("local control plane binaries missing (%v); build them into bin/", err)
	}
	log := zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.InfoLevel))
	ctrl.SetLogger(log)
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 2, PodReadyDelay: time.Second})
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster stop: %v", err)
		}
	})
	if err := c.InstallCRDs(ctx, lws.CRDPaths()...); err != nil {
		t.Fatalf("install LWS CRDs: %v", err)
	}
	r, err := lws.Start(ctx, lws.Options{Config: c.Config, Log: log.WithName("lws"), DisaggregatedSet: true})
	if err != nil {
		t.Fatalf("lws.Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = r.Stop()
		}
	})

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = lwsv1.AddToScheme(scheme)
	_ = disaggv1.AddToScheme(scheme)
	k, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := k.Get(ctx, client.ObjectKey{Name: lws.ValidatingWebhookName}, &v); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range v.Webhooks {
		names = append(names, w.Name)
		if w.Name == "vdisaggregatedset.kb.io" && *w.ClientConfig.URL != r.URL+lws.ValidateDisaggregatedSetPath {
			t.Errorf("vdisaggregatedset.kb.io URL %s", *w.ClientConfig.URL)
		}
	}
	if want := "vleaderworkerset.kb.io vpod.kb.io vdisaggregatedset.kb.io"; strings.Join(names, " ") != want {
		t.Errorf("validating webhooks %v, want %s", names, want)
	}

	// The webhook (not the CRD) rejects a partition.
	bad := newDisaggregatedSet("bad")
	bad.Spec.Roles[0].Spec.RolloutStrategy.RollingUpdateConfiguration = &lwsv1.RollingUpdateConfiguration{Partition: ptr.To[int32](1)}
	if err := k.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "partition is not supported by DisaggregatedSet") {
		t.Errorf("create with partition: %v, want the DisaggregatedSet webhook's denial", err)
	}

	if err := k.Create(ctx, newDisaggregatedSet("demo")); err != nil {
		t.Fatalf("create DisaggregatedSet: %v", err)
	}
	waitFor(ctx, t, "one Ready LWS per role", func() error {
		var list lwsv1.LeaderWorkerSetList
		if err := k.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{disaggv1.SetNameLabelKey: "demo"}); err != nil {
			return err
		}
		roles := map[string]bool{}
		for _, l := range list.Items {
			if l.Status.ReadyReplicas != 1 || l.Labels[disaggv1.RevisionLabelKey] == "" {
				return fmt.Errorf("LWS %s: readyReplicas %d, labels %v", l.Name, l.Status.ReadyReplicas, l.Labels)
			}
			roles[l.Labels[disaggv1.RoleLabelKey]] = true
		}
		if len(list.Items) != 2 || !roles["prefill"] || !roles["decode"] {
			return fmt.Errorf("%d LWS, roles %v", len(list.Items), roles)
		}
		return nil
	})

	stopped = true
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertNoWebhookConfigurations(ctx, t, k)
}

// newDisaggregatedSet has roles prefill and decode of one group of two pods each,
// one GPU per pod, with the fields the CRD rejects as "" set.
func newDisaggregatedSet(name string) *disaggv1.DisaggregatedSet {
	role := func(role string) disaggv1.DisaggregatedRoleSpec {
		return disaggv1.DisaggregatedRoleSpec{Name: role, LeaderWorkerSetTemplateSpec: lwsv1.LeaderWorkerSetTemplateSpec{
			Spec: lwsv1.LeaderWorkerSetSpec{
				Replicas:        ptr.To[int32](1),
				StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
				RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
				LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
					Size:          ptr.To[int32](2),
					RestartPolicy: lwsv1.RecreateGroupOnPodRestart,
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "engine", Image: "example.com/engine:v1",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gpu: resource.MustParse("1")}},
					}}}},
				},
			},
		}}
	}
	return &disaggv1.DisaggregatedSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       disaggv1.DisaggregatedSetSpec{Roles: []disaggv1.DisaggregatedRoleSpec{role("prefill"), role("decode")}},
	}
}
