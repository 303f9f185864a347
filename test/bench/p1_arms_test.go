package bench

// P1's arms that roll no DGD but the DGD's pods, to tell what the operator adds from
// what the pods of Dynamo's contract and their Services cost any controller.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/cluster"
)

// dgdTemplate is the pod template of the DGD's worker Deployment in ns (the rendered
// pods: Dynamo's env, ports, probes, /dev/shm, the discovery ServiceAccount), the
// operator's labels and annotations dropped so that nothing of the operator's selects
// or hears of pods made from it.
func dgdTemplate(b *testing.B, k8s client.Client, ns string) *corev1.PodTemplateSpec {
	var list appsv1.DeploymentList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: "p1"}); err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, "p1-worker-") {
			t := list.Items[i].Spec.Template.DeepCopy()
			t.Labels, t.Annotations = nil, nil
			return t
		}
	}
	b.Fatal("no worker Deployment of the DGD")
	return nil
}

// withPods is tmpl (bare pods of one GPU when nil) running image, labelled labels.
func withPods(tmpl *corev1.PodTemplateSpec, labels map[string]string, image string) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resourceOne()}}}}}}
	if tmpl != nil {
		t = *tmpl.DeepCopy()
	}
	t.Labels = labels
	t.Spec.Containers[0].Image = image
	return t
}

// componentService is the Service Dynamo's operator gives a worker component under
// Kubernetes discovery (DYNAMO.md, Services): ClusterIP, port system 9090, selecting
// its pods; kube-controller-manager keeps an EndpointSlice (and Endpoints) of it.
func componentService(ns, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "system", Port: 9090}}}}
}

// rollDynamo rolls what Dynamo's own operator runs for the worker: a Deployment of the
// DGD's pods and the component's Service, the image changed with the DGD's surge
// (maxSurge 1, maxUnavailable 0) and rolled by the Deployment controller. Against it
// the DGD's time is what the operator adds over the objects a Dynamo user runs today.
func rollDynamo(b *testing.B, k8s client.WithWatch, trace *p1Trace, ns string) time.Duration {
	ctx := context.Background()
	labels := map[string]string{"app": "dynamo"}
	svc := componentService(ns, "dynamo", labels)
	if err := k8s.Create(ctx, svc); err != nil {
		b.Fatal(err)
	}
	took := rollPlain(b, k8s, trace, p1Deployment(ns, "dynamo", labels, withPods(dgdTemplate(b, k8s, ns), labels, "vllm:v1")))
	_ = k8s.Delete(ctx, svc)
	return took
}

// rollFloor rolls pods of tmpl (bare when nil) the way the operator's Deployment
// backend does, by the least any controller can do so: a Deployment per revision, the
// new one created at one replica, and at each new pod's Ready (read from a watch of the
// pods, the first place it shows, where the operator waits for the pod's endpoint to
// be published) the old Deployment scaled down by one, then the new one up by one: no
// custom resource, no status, no Event. With tmpl, each revision also has its Service,
// as the operator's discovery Services. Timed from the new Deployment's creation until
// the old one is at 0 with no pod that is not terminating.
func rollFloor(b *testing.B, k8s client.WithWatch, cs kubernetes.Interface, trace *p1Trace, ns, arm string, tmpl *corev1.PodTemplateSpec) time.Duration {
	ctx := context.Background()
	var objs []client.Object
	revision := func(rev, image string, n int32) *appsv1.Deployment {
		labels := map[string]string{"app": arm, "rev": rev}
		d := p1Deployment(ns, arm+"-"+rev, labels, withPods(tmpl, labels, image))
		d.Spec.Replicas = ptr.To(n)
		if tmpl != nil {
			svc := componentService(ns, d.Name, labels)
			if err := k8s.Create(ctx, svc); err != nil {
				b.Fatal(err)
			}
			objs = append(objs, svc)
		}
		if err := k8s.Create(ctx, d); err != nil {
			b.Fatal(err)
		}
		objs = append(objs, d)
		return d
	}
	old := revision("a", "vllm:v1", Replicas)
	watchUntil(b, k8s, &appsv1.DeploymentList{}, ns, old.Name, func(o runtime.Object) bool { return deploymentDone(o.(*appsv1.Deployment)) })
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + arm})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	scale := func(name string, n int32) {
		body := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "scale"); err != nil {
			b.Fatal(err)
		}
	}
	begin := time.Now()
	trace.begin(arm)
	next := revision("b", "vllm:v2", 1)
	took := floorSteps(b, w, scale, old.Name, next.Name, begin)
	trace.end(arm)
	for _, o := range objs {
		_ = k8s.Delete(ctx, o)
	}
	waitNoPods(b, k8s, client.InNamespace(ns), client.MatchingLabels{"app": arm})
	return took
}

// floorSteps is rollFloor's controller: it reads the pods' events (the old revision's
// to its last pod terminating, the new one's to Ready) and scales.
func floorSteps(b *testing.B, w watch.Interface, scale func(string, int32), old, next string, begin time.Time) time.Duration {
	specOld, specNew := int32(Replicas), int32(1)
	ready, live := map[string]bool{}, map[string]bool{}
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			b.Fatalf("watching pods: %v", ev.Object)
		}
		gone := ev.Type == watch.Deleted || p.DeletionTimestamp != nil
		if p.Labels["rev"] == "a" {
			live[p.Name] = !gone
		} else {
			ready[p.Name] = !gone && cluster.PodReady(p)
		}
		if count(ready) >= specNew && specOld > 0 {
			specOld--
			scale(old, specOld)
			if specNew < Replicas {
				specNew++
				scale(next, specNew)
			}
		}
		if count(ready) == Replicas && specOld == 0 && count(live) == 0 {
			return time.Since(begin)
		}
	}
	b.Fatal("the pods' watch ended")
	return 0
}

func count(m map[string]bool) int32 {
	n := int32(0)
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}
