// Package grove provides the Grove CRDs (embedded in github.com/ai-dynamo/grove/operator/api)
// as files, for envtest, the local control plane and `make run`. The Grove operator
// itself is not available here: tests play it.
package grove

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/ai-dynamo/grove/operator/api/core/v1alpha1/crds"
)

var (
	once sync.Once
	dir  string
	err  error
)

// CRDDir writes Grove's CRDs (PodCliqueSet, PodClique, PodCliqueScalingGroup,
// ClusterTopologyBinding) once per process into a directory named after their content
// under the temporary directory, and returns it. Every process of one Grove API version
// shares that directory (each file is written to a temporary name and renamed, so a
// reader never sees half a file): test runs leave no directory behind per process.
func CRDDir() (string, error) {
	once.Do(func() {
		files := map[string]string{
			"grove.io_podcliquesets.yaml":           crds.PodCliqueSetCRD(),
			"grove.io_podcliques.yaml":              crds.PodCliqueCRD(),
			"grove.io_podcliquescalinggroups.yaml":  crds.PodCliqueScalingGroupCRD(),
			"grove.io_clustertopologybindings.yaml": crds.ClusterTopologyCRD(),
		}
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		sort.Strings(names)
		h := sha256.New()
		for _, name := range names {
			h.Write([]byte(name))
			h.Write([]byte(files[name]))
		}
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("grove-crds-%x", h.Sum(nil)[:6]))
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return
		}
		for _, name := range names {
			path := filepath.Join(dir, name)
			if have, rerr := os.ReadFile(path); rerr == nil && string(have) == files[name] {
				continue
			}
			var f *os.File
			if f, err = os.CreateTemp(dir, name+".*"); err != nil {
				return
			}
			_, err = f.WriteString(files[name])
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(f.Name(), path)
			}
			if err != nil {
				_ = os.Remove(f.Name())
				return
			}
		}
	})
	return dir, err
}
