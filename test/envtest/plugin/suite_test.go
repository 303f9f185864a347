// Package plugin_test runs every kubectl-dgd command in-process against a real API server
// with the operator attached (harness.Start), playing the Deployment controller step by
// step, and compares what the commands print with golden transcripts in testdata/.
// Rewrite them with: go test ./test/envtest/plugin/ -update
package plugin_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/kubectl-dgd/app"
	"github.com/dgd-rollout/operator/test/harness"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run's output")

var (
	env        *harness.Env
	ctx        = context.Background()
	kubeconfig string
	nsN        int
)

func TestPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	// A pass that must happen (a status, an Event) gets 10 s, not Gomega's 1 s: a
	// first pass reads each name it creates past the cache (decide's claim), and CI runs
	// on 2 loaded cores.
	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(harness.PollInterval)
	RunSpecs(t, "kubectl-dgd (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = harness.Start(true)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	dir, err := os.MkdirTemp("", "kubectl-dgd-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = os.RemoveAll(dir) })
	kubeconfig = filepath.Join(dir, "kubeconfig")
	Expect(writeKubeconfig(env.Config, kubeconfig)).To(Succeed())
})

// writeKubeconfig writes a kubeconfig for cfg (server, CA, client certificate or token)
// whose context namespace is "default", as a user's would be.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest", Namespace: "default"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// newNamespace gives every spec its own namespace.
func newNamespace() string {
	nsN++
	ns := fmt.Sprintf("plugin-%d", nsN)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// kubectlDGD runs "kubectl dgd args... -n ns" in-process with the suite's kubeconfig and
// returns what it printed, its error printed as the binary prints it, and the error.
func kubectlDGD(ns string, args ...string) (string, error) {
	var out bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	cmd := app.NewRootCommand(streams, flags)
	cmd.SetArgs(append(args, "--namespace", ns))
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		app.PrintError(&out, err)
	}
	return out.String(), err
}

// transcript records commands and what they print, as a shell session reads.
type transcript struct {
	ns string
	bytes.Buffer
}

// run runs kubectl dgd args in the transcript's namespace, records the command line
// (without -n) and its output, and returns the error.
func (t *transcript) run(args ...string) error {
	out, err := kubectlDGD(t.ns, args...)
	fmt.Fprintf(&t.Buffer, "$ kubectl dgd %s\n%s", strings.Join(args, " "), out)
	return err
}

// must runs args and expects success.
func (t *transcript) must(args ...string) {
	GinkgoHelper()
	Expect(t.run(args...)).To(Succeed(), t.String())
}

// fails runs args and expects an error.
func (t *transcript) fails(args ...string) {
	GinkgoHelper()
	Expect(t.run(args...)).To(HaveOccurred(), t.String())
}

// expectGolden compares got with testdata/name.golden, or rewrites it with -update.
func expectGolden(name, got string) {
	GinkgoHelper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		Expect(os.MkdirAll("testdata", 0o755)).To(Succeed())
		Expect(os.WriteFile(path, []byte(got), 0o644)).To(Succeed())
		return
	}
	want, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred(), "no golden file: run go test ./test/envtest/plugin/ -update")
	Expect(got).To(Equal(string(want)), "golden %s", path)
}

// withCause sets the kubernetes.io/change-cause annotation, as kubectl --record did.
func withCause(d *v1alpha1.DynamoGraphDeployment, cause string) *v1alpha1.DynamoGraphDeployment {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[v1alpha1.AnnotationChangeCause] = cause
	return d
}

// deploy creates a DGD and drives it to its first completed revision.
func deploy(obj *v1alpha1.DynamoGraphDeployment) {
	GinkgoHelper()
	Expect(env.Client.Create(ctx, obj)).To(Succeed())
	_, err := env.Drive(ctx, obj.Namespace, obj.Name, -1, 10, harness.CompletedAt(1))
	Expect(err).NotTo(HaveOccurred())
}

// change applies a change to the live DGD.
func change(ns, name string, f func(*v1alpha1.DynamoGraphDeployment)) {
	GinkgoHelper()
	Eventually(func() error {
		d := getDGD(ns, name)
		f(d)
		return env.Client.Update(ctx, d)
	}).Should(Succeed())
}

// rollImage sets every worker's image (with a change cause) and drives the rollout to
// revision n.
func rollImage(ns, name, image string, n int64) {
	GinkgoHelper()
	change(ns, name, func(d *v1alpha1.DynamoGraphDeployment) {
		harness.SetImage(d, image)
		withCause(d, "set image "+image)
	})
	_, err := env.Drive(ctx, ns, name, -1, 20, harness.CompletedAt(n))
	Expect(err).NotTo(HaveOccurred())
}

func getDGD(ns, name string) *v1alpha1.DynamoGraphDeployment {
	GinkgoHelper()
	d := &v1alpha1.DynamoGraphDeployment{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
	return d
}
