package app

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// allServices is kubectl set image's wildcard: "*=IMAGE" sets every service.
const allServices = "*"

// newSetCommand groups the set verbs (kubectl set).
func newSetCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set SUBCOMMAND",
		Short: "Set specific fields of a DynamoGraphDeployment",
	}
	cmd.AddCommand(newSetImageCommand(c))
	return cmd
}

func newSetImageCommand(c *cli) *cobra.Command {
	var cause string
	cmd := &cobra.Command{
		Use:   "image NAME SERVICE=IMAGE [SERVICE=IMAGE...] [--change-cause=TEXT]",
		Short: "Set the main container image of services of a DynamoGraphDeployment",
		Long: "Set the main container image of each named service (in v1alpha1\n" +
			"spec.services.<service>.extraPodSpec.mainContainer.image, in v1beta1 the \"main\"\n" +
			"container of spec.components[<service>].podTemplate). \"*=IMAGE\" sets every service.\n" +
			"A new worker image is a new revision: the operator rolls it out with the DGD's\n" +
			"rollout settings. The change cause (kubernetes.io/change-cause, the CHANGE-CAUSE of\n" +
			"\"kubectl dgd rollout history\") is --change-cause, or else this command line.\n" +
			"Nothing is written when every service already runs its image.",
		Example: "  kubectl dgd set image vllm-disagg VllmDecodeWorker=vllm-runtime:0.5.0 VllmPrefillWorker=vllm-runtime:0.5.0\n" +
			"  kubectl dgd set image vllm-disagg '*=vllm-runtime:0.5.0' --change-cause=\"vllm-runtime 0.5.0\"",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("%s needs a DynamoGraphDeployment name and at least one SERVICE=IMAGE, got %d arguments (see --help)",
					cmd.CommandPath(), len(args))
			}
			_, err := parseImages(args[1:])
			return err
		},
		ValidArgsFunction: c.completeSetImage,
		RunE: func(cmd *cobra.Command, args []string) error {
			images, _ := parseImages(args[1:])
			if !cmd.Flags().Changed("change-cause") {
				cause = strings.Join(append([]string{cmd.CommandPath()}, args...), " ")
			}
			s, err := c.connect()
			if err != nil {
				return err
			}
			return s.setImage(cmd.Context(), c.streams.Out, args[0], images, cause)
		},
	}
	cmd.Flags().StringVar(&cause, "change-cause", "",
		"The kubernetes.io/change-cause to record (default: this command line)")
	return cmd
}

// serviceImage is one SERVICE=IMAGE argument.
type serviceImage struct{ service, image string }

// parseImages parses SERVICE=IMAGE arguments as kubectl set image does: each names a
// service once, with a non-empty image.
func parseImages(args []string) ([]serviceImage, error) {
	seen := map[string]bool{}
	var out []serviceImage
	for _, arg := range args {
		service, image, ok := strings.Cut(arg, "=")
		if !ok || service == "" || image == "" {
			return nil, fmt.Errorf("invalid argument %q: must be SERVICE=IMAGE", arg)
		}
		if seen[service] {
			return nil, fmt.Errorf("service %q is given more than once", service)
		}
		seen[service] = true
		out = append(out, serviceImage{service, image})
	}
	return out, nil
}

// setImages sets the main container image of the services images names in dgd and
// returns the services it changed, sorted. A service dgd does not have is an error
// that lists the services it has.
func setImages(dgd *v1alpha1.DynamoGraphDeployment, images []serviceImage) ([]string, error) {
	want := map[string]string{}
	for _, si := range images {
		if si.service == allServices {
			for _, name := range dgd.ServiceNames() {
				if _, named := want[name]; !named {
					want[name] = si.image
				}
			}
			continue
		}
		if dgd.Spec.Services[si.service] == nil {
			return nil, fmt.Errorf("dynamographdeployment %q has no service %q (services: %s)",
				dgd.Name, si.service, strings.Join(dgd.ServiceNames(), ", "))
		}
		want[si.service] = si.image // a named service wins over "*"
	}
	var changed []string
	for _, name := range dgd.ServiceNames() {
		image, ok := want[name]
		if !ok {
			continue
		}
		svc := dgd.Spec.Services[name]
		if svc.ExtraPodSpec == nil {
			svc.ExtraPodSpec = &v1alpha1.ExtraPodSpec{}
		}
		if svc.ExtraPodSpec.MainContainer == nil {
			svc.ExtraPodSpec.MainContainer = &corev1.Container{}
		}
		if svc.ExtraPodSpec.MainContainer.Image != image {
			svc.ExtraPodSpec.MainContainer.Image = image
			changed = append(changed, name)
		}
	}
	return changed, nil
}

// setImage sets images in the DGD name with the change cause, retrying on write
// conflicts with a fresh read, and prints what it did.
func (s *session) setImage(ctx context.Context, out io.Writer, name string, images []serviceImage, cause string) error {
	var changed []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dgd, err := s.get(ctx, name)
		if err != nil {
			return err
		}
		if changed, err = setImages(dgd, images); err != nil || len(changed) == 0 {
			return err
		}
		metav1.SetMetaDataAnnotation(&dgd.ObjectMeta, v1alpha1.AnnotationChangeCause, cause)
		return s.client.Update(ctx, dgd)
	})
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		_, err = fmt.Fprintf(out, "%s image unchanged\n", ref(name))
		return err
	}
	_, err = fmt.Fprintf(out, "%s image updated (%s)\n", ref(name), strings.Join(changed, ", "))
	return err
}
