// Package grove provides the Grove CRDs (embedded in github.com/ai-dynamo/grove/operator/api)
// as files, for envtest, the local control plane and `make run`. The Grove operator
// itself is not available here: tests play it.
package grove

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/ai-dynamo/grove/operator/api/core/v1alpha1/crds"
)

var (
	once sync.Once
	dir  string
	err  error
)

// CRDDir writes Grove's CRDs (PodCliqueSet, PodClique, PodCliqueScalingGroup,
// ClusterTopologyBinding) to a temporary directory once per process and returns it.
func CRDDir() (string, error) {
	once.Do(func() {
		if dir, err = os.MkdirTemp("", "grove-crds-"); err != nil {
			return
		}
		for name, body := range map[string]string{
			"grove.io_podcliquesets.yaml":           crds.PodCliqueSetCRD(),
			"grove.io_podcliques.yaml":              crds.PodCliqueCRD(),
			"grove.io_podcliquescalinggroups.yaml":  crds.PodCliqueScalingGroupCRD(),
			"grove.io_clustertopologybindings.yaml": crds.ClusterTopologyCRD(),
		} {
			if err = os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				return
			}
		}
	})
	return dir, err
}
