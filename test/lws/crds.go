package lws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
	"unicode"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

// lwsModule is the module whose controllers, webhooks and CRDs this package uses.
const lwsModule = "sigs.k8s.io/lws"

// crdSubdir is where the LWS module keeps its CRD YAML.
const crdSubdir = "config/crd/bases"

// CRDPaths returns the LWS CRD YAML directory in the module cache
// (<GOMODCACHE>/sigs.k8s.io/lws@<version>/config/crd/bases, holding the
// LeaderWorkerSet and DisaggregatedSet CRDs), for cluster.InstallCRDs or
// InstallCRDs. The version is the one linked into this binary (runtime/debug build
// info), so it works from a clean clone after `go mod download`. If the directory
// cannot be found it still returns the best guess, so that installing from it
// fails with the path in the error; use CRDDir for the reason.
func CRDPaths() []string {
	dir, err := CRDDir()
	if err != nil && dir == "" {
		return nil
	}
	return []string{dir}
}

// CRDDir is CRDPaths with an error when the directory does not exist. It looks,
// in order, at the module version in this binary's build info joined to
// GOMODCACHE (environment, then `go env GOMODCACHE`, then GOPATH/pkg/mod), then at
// `go list -m -f {{.Dir}} sigs.k8s.io/lws` run in this source file's directory.
func CRDDir() (string, error) {
	var guess string
	if mod, ok := lwsModuleFromBuildInfo(); ok {
		if mod.Replace != nil {
			mod = mod.Replace
		}
		var dir string
		if mod.Version == "" { // replaced by a local directory
			dir = mod.Path
		} else if cache := modCache(); cache != "" {
			dir = filepath.Join(cache, escapeModulePath(mod.Path)+"@"+escapeModulePath(mod.Version))
		}
		if dir != "" {
			guess = filepath.Join(dir, crdSubdir)
			if isDir(guess) {
				return guess, nil
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", lwsModule)
		cmd.Dir = filepath.Dir(file)
		if out, err := cmd.Output(); err == nil {
			if d := strings.TrimSpace(string(out)); d != "" {
				p := filepath.Join(d, crdSubdir)
				if isDir(p) {
					return p, nil
				}
				if guess == "" {
					guess = p
				}
			}
		}
	}
	if guess == "" {
		return "", fmt.Errorf("cannot locate module %s (not in build info, `go list -m` failed); run `go mod download`", lwsModule)
	}
	return guess, fmt.Errorf("LWS CRD directory %s does not exist; run `go mod download %s`", guess, lwsModule)
}

func lwsModuleFromBuildInfo() (*debug.Module, bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, false
	}
	for _, m := range bi.Deps {
		if m.Path == lwsModule {
			return m, true
		}
	}
	return nil, false
}

// modCache is GOMODCACHE as the go command would resolve it.
func modCache() string {
	if c := os.Getenv("GOMODCACHE"); c != "" {
		return c
	}
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		if c := strings.TrimSpace(string(out)); c != "" {
			return c
		}
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		gopath = filepath.Join(home, "go")
	}
	return filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod")
}

// escapeModulePath applies the module cache's case encoding (upper-case letters
// become '!' and the lower-case letter).
func escapeModulePath(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// InstallCRDs creates or updates the CustomResourceDefinitions found in the YAML
// files of dirs (default CRDPaths()) and waits until each is Established. It is
// for callers without a test/cluster Cluster (cmd/lws-local); with one, use
// Cluster.InstallCRDs(ctx, CRDPaths()...).
func InstallCRDs(ctx context.Context, cfg *rest.Config, dirs ...string) error {
	if len(dirs) == 0 {
		dir, err := CRDDir()
		if err != nil {
			return err
		}
		dirs = []string{dir}
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("no CRD YAML in %s", dir)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := dec.Decode(crd); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				if crd.Kind == "CustomResourceDefinition" {
					crds = append(crds, crd)
				}
			}
		}
	}
	for _, crd := range crds {
		api := cs.ApiextensionsV1().CustomResourceDefinitions()
		cur, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = cur.ResourceVersion
			_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		for {
			cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if crdEstablished(cur) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not Established: %w", crd.Name, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
