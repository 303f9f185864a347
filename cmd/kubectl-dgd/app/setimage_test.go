package app

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// withImages returns dgdWith's DGD whose prefill runs image (the frontend has no
// extraPodSpec at all).
func withImages(image string) *v1alpha1.DynamoGraphDeployment {
	d := dgdWith(func(*v1alpha1.DynamoGraphDeploymentStatus) {})
	d.Spec.Services["prefill"].ExtraPodSpec = &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: image}}
	return d
}

func imageOf(d *v1alpha1.DynamoGraphDeployment, service string) string {
	eps := d.Spec.Services[service].ExtraPodSpec
	if eps == nil || eps.MainContainer == nil {
		return ""
	}
	return eps.MainContainer.Image
}

func TestSetImages(t *testing.T) {
	cases := map[string]struct {
		args    []string
		changed []string
		images  map[string]string // service -> image after
		wantErr string
	}{
		"one service": {
			args: []string{"prefill=vllm:v2"}, changed: []string{"prefill"},
			images: map[string]string{"prefill": "vllm:v2", "Frontend": ""},
		},
		"the same image changes nothing": {
			args:   []string{"prefill=vllm:v1"},
			images: map[string]string{"prefill": "vllm:v1", "Frontend": ""},
		},
		"a service without extraPodSpec gets a main container": {
			args: []string{"Frontend=fe:v2", "prefill=vllm:v1"}, changed: []string{"Frontend"},
			images: map[string]string{"prefill": "vllm:v1", "Frontend": "fe:v2"},
		},
		"* sets every service, a named one wins": {
			args: []string{"*=all:v3", "Frontend=fe:v3"}, changed: []string{"Frontend", "prefill"},
			images: map[string]string{"prefill": "all:v3", "Frontend": "fe:v3"},
		},
		"an unknown service names itself and the services": {
			args:    []string{"prefill=vllm:v2", "decode=vllm:v2"},
			wantErr: `dynamographdeployment "g" has no service "decode" (services: Frontend, prefill)`,
			images:  map[string]string{"prefill": "vllm:v1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := withImages("vllm:v1")
			images, err := parseImages(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			changed, err := setImages(d, images)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.changed, changed); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
			for svc, want := range tc.images {
				if got := imageOf(d, svc); got != want && tc.wantErr == "" {
					t.Errorf("%s image = %q, want %q", svc, got, want)
				}
			}
		})
	}
}

func TestParseImages(t *testing.T) {
	for in, wantErr := range map[string]string{
		"a=b":     "",
		"a=b c=d": "",
		"a":       `invalid argument "a": must be SERVICE=IMAGE`,
		"=b":      `invalid argument "=b": must be SERVICE=IMAGE`,
		"a=":      `invalid argument "a=": must be SERVICE=IMAGE`,
		"a=b a=c": `service "a" is given more than once`,
	} {
		_, err := parseImages(strings.Fields(in))
		if got := ""; err != nil {
			got = err.Error()
			if got != wantErr {
				t.Errorf("parseImages(%q) error = %q, want %q", in, got, wantErr)
			}
		} else if wantErr != "" {
			t.Errorf("parseImages(%q) succeeded, want %q", in, wantErr)
		}
	}
}
