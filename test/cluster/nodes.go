package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// FakeNodeAnnotation marks the nodes KWOK manages (value "fake").
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	// NodeLabel is the label every fake node carries, with value "kwok".
	NodeLabel = "type"
	// GPUResource is the extended resource the fake nodes offer.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// startNodes starts KWOK, creates the fake nodes and waits until they are Ready.
// Pod IPs come from 10.244.0.0/16 (KWOK's default /24 holds only 254 pods); nodes
// and pod hostIPs are 127.0.0.1, where no kubelet listens, so kubectl logs/exec fail
// at once instead of timing out.
func (c *Cluster) startNodes(ctx context.Context) error {
	stages := filepath.Join(c.WorkDir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, []byte(stagesYAML(c.opts.PodReadyDelay)), 0o600); err != nil {
		return err
	}
	p, err := c.launch("kwok", []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--config=" + stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
		"--cidr=10.244.0.1/16",
		"--node-ip=127.0.0.1",
	})
	if err != nil {
		return err
	}
	for i := range c.opts.Nodes {
		if err := c.createNode(ctx, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	err = waitHealthy(ctx, p, c.nodesReady)
	if err != nil {
		return fmt.Errorf("kwok nodes: %w; last kwok output:\n%s", err, lastLines(p.tail.String(), 30))
	}
	return nil
}

// createNode creates one fake node: capacity cpu 32, memory 256Gi, ephemeral-storage
// 1Ti (a real kubelet reports its root filesystem; Dynamo's own examples request
// ephemeral storage, which a node reporting none could never schedule), pods 110 and
// GPUsPerNode GPUs, no taints.
func (c *Cluster) createNode(ctx context.Context, name string) error {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		GPUResource:                     resource.MustParse(strconv.Itoa(c.opts.GPUsPerNode)),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{FakeNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				NodeLabel: "kwok", corev1.LabelHostname: name,
				corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	_, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	c.mu.Lock()
	c.nodeName = append(c.nodeName, name)
	c.mu.Unlock()
	return nil
}

// NodeNames are the names of the fake nodes Start created.
func (c *Cluster) NodeNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.nodeName...)
}

// WaitForNodesReady waits until every fake node Start created is Ready and carries
// neither the node.kubernetes.io/not-ready nor the unreachable taint (the
// node-lifecycle controller removes the not-ready taint admission put on at
// creation shortly after KWOK reports Ready).
func (c *Cluster) WaitForNodesReady(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := c.nodesReady(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes not ready: %w (%v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// nodesReady is nil when every fake node is Ready and untainted by the node
// lifecycle.
func (c *Cluster) nodesReady(ctx context.Context) error {
	for _, name := range c.NodeNames() {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(node) {
			return fmt.Errorf("node %s not Ready", name)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				return fmt.Errorf("node %s has taint %s", name, taint.Key)
			}
		}
	}
	return nil
}

// PodReady reports whether a pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitForDefaultServiceAccount waits until the controller-manager has created the
// ServiceAccount default/default, without which pod creation is rejected.
func (c *Cluster) waitForDefaultServiceAccount(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		select {
		case <-ctx.Done():
			// The controller-manager makes it: its last output says why it has not.
			return fmt.Errorf("default ServiceAccount: %w; kube-controller-manager's last output:\n%s", ctx.Err(), c.lastOutput("kube-controller-manager", 30))
		case <-t.C:
		}
	}
}
