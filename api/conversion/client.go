package conversion

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
)

// Client is a controller-runtime client on which v1alpha1 DynamoGraphDeployments are
// read and written as v1beta1, the storage version, converted in-process with ToHub and
// FromHub (what /convert serves): the API server never calls the conversion webhook for
// them, and no deprecation warning is printed. Every other object goes through as is.
// A patch of a v1alpha1 DGD that touches only what both versions spell alike
// (metadata, spec.rollout, spec.backend, spec.revisionHistoryLimit, spec.restart...) is sent as v1beta1
// too; any other is sent as v1alpha1, which the API server converts through /convert.
type Client struct {
	client.Client
}

// NewClient wraps c (whose scheme must know both versions).
func NewClient(c client.Client) *Client { return &Client{Client: c} }

// Reader wraps a client.Reader (such as a manager's API reader) the same way.
type Reader struct{ client.Reader }

// Get implements client.Reader.
func (r Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return get(ctx, r.Reader, key, obj, opts...)
}

// List implements client.Reader.
func (r Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return listDGDs(ctx, r.Reader, list, opts...)
}

func get(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	a, ok := obj.(*v1alpha1.DynamoGraphDeployment)
	if !ok {
		return r.Get(ctx, key, obj, opts...)
	}
	var b v1beta1.DynamoGraphDeployment
	if err := r.Get(ctx, key, &b, opts...); err != nil {
		return err
	}
	return into(&b, a)
}

func listDGDs(ctx context.Context, r client.Reader, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*v1alpha1.DynamoGraphDeploymentList)
	if !ok {
		return r.List(ctx, list, opts...)
	}
	var bl v1beta1.DynamoGraphDeploymentList
	if err := r.List(ctx, &bl, opts...); err != nil {
		return err
	}
	l.ListMeta = bl.ListMeta
	l.Items = make([]v1alpha1.DynamoGraphDeployment, len(bl.Items))
	for i := range bl.Items {
		if err := into(&bl.Items[i], &l.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// into converts b into a, replacing a's content.
func into(b *v1beta1.DynamoGraphDeployment, a *v1alpha1.DynamoGraphDeployment) error {
	*a = v1alpha1.DynamoGraphDeployment{}
	return FromHub(b, a)
}

// hub converts a to v1beta1.
func hub(a *v1alpha1.DynamoGraphDeployment) (*v1beta1.DynamoGraphDeployment, error) {
	b := &v1beta1.DynamoGraphDeployment{}
	return b, ToHub(a, b)
}

// Get implements client.Client.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return get(ctx, c.Client, key, obj, opts...)
}

// List implements client.Client.
func (c *Client) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return listDGDs(ctx, c.Client, list, opts...)
}

// Create implements client.Client.
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.write(obj, func(o client.Object) error { return c.Client.Create(ctx, o, opts...) })
}

// Update implements client.Client.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.write(obj, func(o client.Object) error { return c.Client.Update(ctx, o, opts...) })
}

// Delete implements client.Client.
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.write(obj, func(o client.Object) error { return c.Client.Delete(ctx, o, opts...) })
}

// Patch implements client.Client (see Client).
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	a, ok := obj.(*v1alpha1.DynamoGraphDeployment)
	if !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	if !sameInBothVersions(patch.Type(), data) {
		return c.Client.Patch(ctx, obj, client.RawPatch(patch.Type(), data), opts...)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("DynamoGraphDeployment"))
	u.SetNamespace(a.Namespace)
	u.SetName(a.Name)
	if err := c.Client.Patch(ctx, u, client.RawPatch(patch.Type(), data), opts...); err != nil {
		return err
	}
	var b v1beta1.DynamoGraphDeployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
		return err
	}
	return into(&b, a)
}

// sameInBothVersions reports whether a merge patch only touches fields spelled alike in
// both versions.
func sameInBothVersions(t types.PatchType, data []byte) bool {
	if t != types.MergePatchType {
		return false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(data, &p) != nil {
		return false
	}
	for k, v := range p {
		switch k {
		case "metadata", "apiVersion", "kind":
		case "spec":
			var spec map[string]json.RawMessage
			if json.Unmarshal(v, &spec) != nil {
				return false
			}
			for sk := range spec {
				switch sk {
				case "rollout", "backend", "revisionHistoryLimit", "annotations", "labels", "priorityClassName", "backendFramework", "restart":
				default:
					return false
				}
			}
		default:
			return false
		}
	}
	var meta struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &meta) == nil {
		for k := range meta.Metadata.Annotations {
			if IsConversionAnnotation(k) {
				return false
			}
		}
	}
	return true
}

// write converts a v1alpha1 DGD to v1beta1 for do, and the answer back into obj.
func (c *Client) write(obj client.Object, do func(client.Object) error) error {
	a, ok := obj.(*v1alpha1.DynamoGraphDeployment)
	if !ok {
		return do(obj)
	}
	b, err := hub(a)
	if err != nil {
		return err
	}
	if err := do(b); err != nil {
		return err
	}
	return into(b, a)
}

// Status implements client.StatusClient.
func (c *Client) Status() client.SubResourceWriter { return c.SubResource("status") }

// SubResource implements client.SubResourceClientConstructor.
func (c *Client) SubResource(sub string) client.SubResourceClient {
	return &subResource{SubResourceClient: c.Client.SubResource(sub), c: c}
}

type subResource struct {
	client.SubResourceClient
	c *Client
}

func (s *subResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.c.write(obj, func(o client.Object) error { return s.SubResourceClient.Update(ctx, o, opts...) })
}

// Patch of a DGD's status: the status is spelled alike in both versions but for the
// component map's name, so it goes through as v1alpha1 unless it touches only
// conditions and scalar fields.
func (s *subResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

// WithWatch is Client for a client.WithWatch: a watch of v1alpha1 DGDs watches v1beta1
// and converts every event.
type WithWatch struct {
	*Client
	w client.WithWatch
}

// NewWithWatch wraps c.
func NewWithWatch(c client.WithWatch) *WithWatch { return &WithWatch{Client: NewClient(c), w: c} }

// Watch implements client.WithWatch.
func (c *WithWatch) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	if _, ok := list.(*v1alpha1.DynamoGraphDeploymentList); !ok {
		return c.w.Watch(ctx, list, opts...)
	}
	w, err := c.w.Watch(ctx, &v1beta1.DynamoGraphDeploymentList{}, opts...)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if b, ok := e.Object.(*v1beta1.DynamoGraphDeployment); ok {
			a := &v1alpha1.DynamoGraphDeployment{}
			if err := FromHub(b, a); err != nil {
				return watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure,
					Message: fmt.Sprintf("converting %s/%s: %v", b.Namespace, b.Name, err)}}, true
			}
			e.Object = a
		}
		return e, true
	}), nil
}
