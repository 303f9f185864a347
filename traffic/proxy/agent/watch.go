package agent

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dgd-rollout/operator/traffic/proxy"
)

// desired is the newest desired ConfigMap, read: a split and its version, or why it
// could not be read (the agent then keeps the split it has).
type desired struct {
	split   proxy.Split
	version string
	err     error
}

// mailbox holds the newest desired value only: a pass that starts reads the newest,
// and the ones it never saw do not queue up.
type mailbox struct {
	mu    sync.Mutex
	value *desired
	ready chan struct{}
}

func (m *mailbox) put(d desired) {
	m.mu.Lock()
	m.value = &d
	m.mu.Unlock()
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

func (m *mailbox) take() (desired, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.value == nil {
		return desired{}, false
	}
	d := *m.value
	m.value = nil
	return d, true
}

// watchSplit lists and watches the desired ConfigMap alone, by a field selector on its
// name: the one form of list and watch a Role with resourceNames grants
// (proxy.Rules). client-go's reflector relists and rewatches on every error, with
// exponential backoff from 0.8 s to 30 s (k8s.io/client-go tools/cache/reflector.go,
// defaultBackoffInit, defaultBackoffMax), so an API server that fails or restarts is
// waited out.
func watchSplit(ctx context.Context, cs kubernetes.Interface, o Options) *mailbox {
	m := &mailbox{ready: make(chan struct{}, 1)}
	selector := fields.OneTermEqualSelector("metadata.name", o.SplitConfigMap).String()
	lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", o.Namespace,
		func(lo *metav1.ListOptions) { lo.FieldSelector = selector })
	read := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		s, version, err := proxy.ParseSplit(cm.Data)
		if err != nil {
			err = fmt.Errorf("ConfigMap %s/%s: %w", o.Namespace, o.SplitConfigMap, err)
		}
		m.put(desired{split: s, version: version, err: err})
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { read(obj) },
			UpdateFunc: func(_, obj any) { read(obj) },
			DeleteFunc: func(any) {
				m.put(desired{err: fmt.Errorf("ConfigMap %s/%s was deleted", o.Namespace, o.SplitConfigMap)})
			},
		},
	})
	go informer.RunWithContext(ctx)
	return m
}
