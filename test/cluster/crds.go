package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

// InstallCRDs creates (or updates) the CustomResourceDefinitions in paths - YAML or
// JSON files, or directories of them (not recursive; other files are skipped) -
// and waits until each is Established. Documents of any other kind are skipped.
func (c *Cluster) InstallCRDs(ctx context.Context, paths ...string) error {
	return installCRDs(ctx, c.Config, applyCRD, paths)
}

// InstallMissingCRDs installs the CRDs in paths that the cluster at cfg does not have
// yet, leaving any that exist as they are (a Dynamo platform's own copy wins), and waits
// until they are Established.
func InstallMissingCRDs(ctx context.Context, cfg *rest.Config, paths ...string) error {
	return installCRDs(ctx, cfg, createCRD, paths)
}

// installCRDs writes every CRD of paths with write, then waits until each is Established.
func installCRDs(ctx context.Context, cfg *rest.Config, write func(context.Context, apiextensionsclient.Interface, *apiextensionsv1.CustomResourceDefinition) error, paths []string) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds, err := ReadCRDs(paths...)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := write(ctx, cs, crd); err != nil {
			return err
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, cs, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

// createCRD creates crd unless one of its name exists.
func createCRD(ctx context.Context, cs apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
	}
	return nil
}

// ReadCRDs decodes every CRD document in the files (or directories' files) paths.
func ReadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		files, err := manifestFiles(path)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			crds, err := decodeCRDs(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, crds...)
		}
	}
	return out, nil
}

// manifestFiles is path itself, or the .yaml/.yml/.json files directly in it.
func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if e.Type()&fs.ModeType == 0 {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	return files, nil
}

// decodeCRDs returns the CustomResourceDefinition documents of a multi-document file.
func decodeCRDs(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := dec.Decode(crd)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if crd.Kind == "CustomResourceDefinition" && strings.HasPrefix(crd.APIVersion, "apiextensions.k8s.io/") {
			out = append(out, crd)
		}
	}
}

// applyCRD creates crd, or replaces the spec of an existing one.
func applyCRD(ctx context.Context, cs apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	_, err := api.Create(ctx, crd, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	crd.ResourceVersion = old.ResourceVersion
	_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
	return err
}

// waitEstablished waits for the CRD's Established condition.
func waitEstablished(ctx context.Context, cs apiextensionsclient.Interface, name string) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

// ReadObjects decodes every document of a YAML or JSON manifest file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}
