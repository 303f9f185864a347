package lws

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
	lwscontrollers "sigs.k8s.io/lws/pkg/controllers"
	disaggcontroller "sigs.k8s.io/lws/pkg/controllers/disaggregatedset"
	lwswebhooks "sigs.k8s.io/lws/pkg/webhooks"
	disaggwebhook "sigs.k8s.io/lws/pkg/webhooks/disaggregatedset"

	"github.com/dgd-rollout/operator/freeport"
)

// Names of the webhook configurations a Runner registers. They are fixed so that
// leftovers of a killed run can be found and deleted (CleanupStaleWebhooks).
const (
	MutatingWebhookName   = "dgd-e2e-lws-mutating"
	ValidatingWebhookName = "dgd-e2e-lws-validating"
)

// ManagedByLabel marks the webhook configurations (value "dgd-e2e-lws").
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Webhook paths served by LWS's webhooks (controller-runtime's generated paths,
// as in LWS's config/webhook/manifests.yaml).
const (
	MutateLeaderWorkerSetPath   = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
	ValidateLeaderWorkerSetPath = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
	MutatePodPath               = "/mutate--v1-pod"
	ValidatePodPath             = "/validate--v1-pod"
	// ValidateDisaggregatedSetPath is served only with Options.DisaggregatedSet.
	ValidateDisaggregatedSetPath = "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset"
)

// probeName names the server-side dry-run objects Start uses to check that the API
// server routes admission requests to this process. Dry-run objects are never
// persisted.
const (
	probeName      = "dgd-e2e-lws-probe"
	probeNamespace = "default"
)

// Options configures Start.
type Options struct {
	// Config reaches the API server (required). The LWS CRDs must be installed.
	Config *rest.Config
	// CertDir receives the throw-away CA and serving certificate (ca.crt, tls.crt,
	// tls.key). Default: a temporary directory, removed by Stop.
	CertDir string
	// Log receives the manager's, controllers' and webhooks' logs. Default: discard.
	Log logr.Logger
	// DisaggregatedSet also runs LWS's DisaggregatedSet controller
	// (pkg/controllers/disaggregatedset, as upstream's cmd/main.go wires it) and its
	// validating webhook (pkg/webhooks/disaggregatedset), registered as
	// vdisaggregatedset.kb.io in the validating configuration. It needs the
	// DisaggregatedSet CRD (CRDPaths installs both). Default false: only
	// LeaderWorkerSet.
	DisaggregatedSet bool
}

// Runner is a running in-process LWS: manager, controllers, webhook server and
// the webhook configurations that point at it. Stop it with Stop.
type Runner struct {
	// URL is the webhook server's base URL, https://127.0.0.1:<port>.
	URL string
	// CABundle is the PEM CA the webhook configurations trust.
	CABundle []byte
	// StartupDuration is how long Start took.
	StartupDuration time.Duration

	cfg     *rest.Config
	log     logr.Logger
	disagg  bool
	mgr     ctrl.Manager
	certDir string
	tempDir bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when mgr.Start returned
	mgrErr  error         // mgr.Start's result, valid after done

	stopOnce sync.Once
	stopErr  error
}

// Start runs the LWS controllers and webhooks in-process and registers the
// webhooks with the API server (see the package documentation). It first deletes
// configurations a killed previous run may have left. It needs the LWS CRDs
// installed and the default ServiceAccount in namespace default (its readiness
// probes are server-side dry-run creates of a LeaderWorkerSet and an LWS-labelled
// pod there; nothing is persisted). ctx bounds only the startup (30 s apply when
// it has no deadline); the Runner runs until Stop. On error everything started is
// stopped and the configurations are deleted.
func Start(ctx context.Context, opts Options) (*Runner, error) {
	begin := time.Now()
	if opts.Config == nil {
		return nil, errors.New("lws: Options.Config is required")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	log := opts.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	r := &Runner{cfg: rest.CopyConfig(opts.Config), log: log, certDir: opts.CertDir, disagg: opts.DisaggregatedSet,
		done: make(chan struct{})}
	if err := CleanupStaleWebhooks(ctx, r.cfg); err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	r.StartupDuration = time.Since(begin)
	log.Info("LWS controllers and webhooks running", "url", r.URL, "startup", r.StartupDuration)
	return r, nil
}

func (r *Runner) start(ctx context.Context) error {
	if r.certDir == "" {
		dir, err := os.MkdirTemp("", "lws-webhook-")
		if err != nil {
			return err
		}
		r.certDir, r.tempDir = dir, true
	} else if err := os.MkdirAll(r.certDir, 0o700); err != nil {
		return err
	}
	ca, err := writeServingCerts(r.certDir)
	if err != nil {
		return fmt.Errorf("lws: webhook certificates: %w", err)
	}
	r.CABundle = ca
	port, err := freePort()
	if err != nil {
		return err
	}
	r.URL = fmt.Sprintf("https://127.0.0.1:%d", port)

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(lwsv1.AddToScheme(scheme))
	utilruntime.Must(disaggv1.AddToScheme(scheme))

	paths := []string{MutateLeaderWorkerSetPath, ValidateLeaderWorkerSetPath, MutatePodPath, ValidatePodPath}
	if r.disagg {
		paths = append(paths, ValidateDisaggregatedSetPath)
	}
	srv := &trackingServer{
		Server: webhook.NewServer(webhook.Options{
			Host:    "127.0.0.1",
			Port:    port,
			CertDir: r.certDir,
			// As upstream: no HTTP/2 (CVE-2023-44487 / -39325).
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		}),
		seen:  map[string]bool{},
		paths: paths,
	}
	mgr, err := ctrl.NewManager(r.cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 r.log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		WebhookServer:          srv,
		// Above net/http's own 5 s: Server.Shutdown waits for a connection that has
		// sent no request header yet (StateNew) until it is 5 s old (net/http
		// server.go, closeIdleConns, issue 22682), and the API server may have just
		// opened one to the webhooks; at exactly 5 s, Stop failed with "failed
		// waiting for all runnables to end within grace period of 5s" when it had.
		GracefulShutdownTimeout: ptr.To(15 * time.Second),
		// Controller names ("leaderworkerset", "pod") are unique per process only
		// if nothing else in the process uses them; tests also start several
		// Runners one after another.
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("lws: manager: %w", err)
	}
	r.mgr = mgr

	// What upstream's cmd/main.go wires (minus DisaggregatedSet, cert rotation,
	// gang scheduling).
	if err := lwscontrollers.SetupIndexes(mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("lws: indexes: %w", err)
	}
	if err := lwscontrollers.NewLeaderWorkerSetReconciler(mgr.GetClient(), mgr.GetScheme(),
		mgr.GetEventRecorder("leaderworkerset")).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("lws: LeaderWorkerSet controller: %w", err)
	}
	if err := lwscontrollers.NewPodReconciler(mgr.GetClient(), mgr.GetScheme(),
		mgr.GetEventRecorder("leaderworkerset"), nil).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("lws: Pod controller: %w", err)
	}
	if err := lwswebhooks.SetupLeaderWorkerSetWebhook(mgr); err != nil {
		return fmt.Errorf("lws: LeaderWorkerSet webhook: %w", err)
	}
	if err := lwswebhooks.NewPodWebhook(nil).Setup(mgr); err != nil {
		return fmt.Errorf("lws: Pod webhook: %w", err)
	}
	if r.disagg {
		if err := (&disaggcontroller.DisaggregatedSetReconciler{
			Client: mgr.GetClient(),
			Scheme: mgr.GetScheme(),
			Record: mgr.GetEventRecorder("disaggregatedset"),
		}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("lws: DisaggregatedSet controller: %w", err)
		}
		if err := disaggwebhook.SetupDisaggregatedSetWebhook(mgr); err != nil {
			return fmt.Errorf("lws: DisaggregatedSet webhook: %w", err)
		}
	}

	mgrCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.mgrErr = mgr.Start(mgrCtx)
	}()

	// 1. The webhook server answers TLS on its port.
	phase := time.Now()
	checker := srv.StartedChecker()
	if err := r.poll(ctx, "webhook server listening", func() error { return checker(nil) }); err != nil {
		return err
	}
	r.log.V(1).Info("webhook server listening", "took", time.Since(phase))
	// 2. The API server has our configurations and routes to us: dry-run probes
	//    until each of the four (five with DisaggregatedSet) webhooks has seen a
	//    request.
	phase = time.Now()
	if err := r.applyWebhookConfigurations(ctx); err != nil {
		return err
	}
	c, err := client.New(r.cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	c = client.NewDryRunClient(c)
	// The first write of a LeaderWorkerSet after its CRD is installed takes the
	// API server ~2 s (one-time warm-up for the large schema); paid here.
	if err := r.poll(ctx, "API server calling the LWS webhooks", func() error {
		missing := srv.missing()
		if len(missing) == 0 {
			return nil
		}
		t0 := time.Now()
		probeErr := errors.Join(
			ignoreAlreadyExists(c.Create(ctx, probeLWS())),
			ignoreAlreadyExists(c.Create(ctx, probePod())))
		if r.disagg {
			probeErr = errors.Join(probeErr, ignoreAlreadyExists(c.Create(ctx, probeDisaggregatedSet())))
		}
		r.log.V(2).Info("dry-run probe", "notCalledYet", missing, "err", probeErr, "took", time.Since(t0))
		if missing = srv.missing(); len(missing) == 0 {
			return nil
		}
		return fmt.Errorf("webhooks not called yet: %v (last probe: %v)", missing, probeErr)
	}); err != nil {
		return err
	}
	r.log.V(1).Info("API server calls the webhooks", "took", time.Since(phase))
	// 3. The controllers' caches are synced.
	phase = time.Now()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return r.startErr(fmt.Errorf("lws: caches not synced: %w", ctx.Err()))
	}
	r.log.V(1).Info("caches synced", "took", time.Since(phase))
	return nil
}

// poll runs check every 50 ms until it succeeds, ctx ends or the manager exits.
func (r *Runner) poll(ctx context.Context, what string, check func() error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lws: waiting for %s: %w (%v)", what, ctx.Err(), err)
		case <-r.done:
			return r.startErr(nil)
		case <-tick.C:
		}
	}
}

// startErr reports the manager's exit if it has exited, else err.
func (r *Runner) startErr(err error) error {
	select {
	case <-r.done:
		return fmt.Errorf("lws: manager exited during startup: %v", r.mgrErr)
	default:
		return err
	}
}

// Manager is the controller-runtime manager running the LWS controllers.
func (r *Runner) Manager() ctrl.Manager { return r.mgr }

// Done is closed when the manager has exited (after Stop, or on its own failure).
func (r *Runner) Done() <-chan struct{} { return r.done }

// Err is the manager's exit error once Done is closed (nil after a clean Stop).
func (r *Runner) Err() error {
	select {
	case <-r.done:
		if errors.Is(r.mgrErr, context.Canceled) {
			return nil
		}
		return r.mgrErr
	default:
		return nil
	}
}

// Stop stops the manager (controllers and webhook server), then deletes the
// webhook configurations (after the server, so that LWS pods created meanwhile are
// refused and retried rather than admitted without LWS's labels) and a temporary
// CertDir. It is idempotent.
func (r *Runner) Stop() error {
	if r == nil {
		return nil
	}
	r.stopOnce.Do(func() {
		var errs []error
		if r.cancel != nil {
			r.cancel()
			select {
			case <-r.done:
				if r.mgrErr != nil && !errors.Is(r.mgrErr, context.Canceled) {
					errs = append(errs, fmt.Errorf("lws: manager: %w", r.mgrErr))
				}
			case <-time.After(15 * time.Second):
				errs = append(errs, errors.New("lws: manager did not stop within 15s"))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errs = append(errs, CleanupStaleWebhooks(ctx, r.cfg))
		if r.tempDir {
			errs = append(errs, os.RemoveAll(r.certDir))
		}
		r.stopErr = errors.Join(errs...)
	})
	return r.stopErr
}

// CleanupStaleWebhooks deletes the webhook configurations named
// MutatingWebhookName and ValidatingWebhookName, if any: the leftovers of a run
// killed before Stop, whose failurePolicy Fail would otherwise make LWS writes and
// LWS pod creation fail. Start calls it first.
func CleanupStaleWebhooks(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	return errors.Join(
		client.IgnoreNotFound(c.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: MutatingWebhookName}})),
		client.IgnoreNotFound(c.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ValidatingWebhookName}})),
	)
}

// WebhookConfigurations returns the configurations a Runner serving at url
// (https://127.0.0.1:<port>) with CA caBundle registers: LWS's
// config/webhook/manifests.yaml after its kustomize patches, with
// clientConfig.url instead of a Service, without the DisaggregatedSet webhook
// (see WebhookConfigurationsWith).
func WebhookConfigurations(url string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	return WebhookConfigurationsWith(url, caBundle, false)
}

// WebhookConfigurationsWith is WebhookConfigurations, plus, when
// disaggregatedSet is true, the validating webhook vdisaggregatedset.kb.io
// (ValidateDisaggregatedSetPath; disaggregatedsets CREATE,UPDATE) as in LWS's
// config/webhook/manifests.yaml: what a Runner with Options.DisaggregatedSet
// registers.
func WebhookConfigurationsWith(url string, caBundle []byte, disaggregatedSet bool) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: "dgd-e2e-lws"}}
	}
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: caBundle}
	}
	rule := func(group, resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource},
			},
		}}
	}
	lwsPods := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: lwsv1.SetNameLabelKey, Operator: metav1.LabelSelectorOpExists,
	}}}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	fail := ptr.To(admissionregistrationv1.Fail)
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	v1 := []string{"v1"}
	timeout := ptr.To[int32](10)

	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: meta(MutatingWebhookName),
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mleaderworkerset.kb.io", ClientConfig: cc(MutateLeaderWorkerSetPath),
			Rules:         rule(lwsv1.GroupVersion.Group, "leaderworkersets", create, update),
			FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: v1, TimeoutSeconds: timeout,
		}, {
			Name: "mpod.kb.io", ClientConfig: cc(MutatePodPath),
			Rules:          rule("", "pods", create),
			ObjectSelector: lwsPods,
			FailurePolicy:  fail, SideEffects: none, AdmissionReviewVersions: v1, TimeoutSeconds: timeout,
		}},
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: meta(ValidatingWebhookName),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vleaderworkerset.kb.io", ClientConfig: cc(ValidateLeaderWorkerSetPath),
			Rules:         rule(lwsv1.GroupVersion.Group, "leaderworkersets", create, update),
			FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: v1, TimeoutSeconds: timeout,
		}, {
			Name: "vpod.kb.io", ClientConfig: cc(ValidatePodPath),
			Rules:          rule("", "pods", create, update),
			ObjectSelector: lwsPods,
			FailurePolicy:  fail, SideEffects: none, AdmissionReviewVersions: v1, TimeoutSeconds: timeout,
		}},
	}
	if disaggregatedSet {
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: "vdisaggregatedset.kb.io", ClientConfig: cc(ValidateDisaggregatedSetPath),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{create, update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{disaggv1.GroupVersion.Group}, APIVersions: []string{disaggv1.GroupVersion.Version},
					Resources: []string{"disaggregatedsets"},
				},
			}},
			FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: v1, TimeoutSeconds: timeout,
		})
	}
	return m, v
}

// applyWebhookConfigurations creates or updates the two configurations.
func (r *Runner) applyWebhookConfigurations(ctx context.Context) error {
	c, err := client.New(r.cfg, client.Options{})
	if err != nil {
		return err
	}
	m, v := WebhookConfigurationsWith(r.URL, r.CABundle, r.disagg)
	for _, obj := range []client.Object{m, v} {
		err := c.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			cur := obj.DeepCopyObject().(client.Object)
			if err = c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err == nil {
				obj.SetResourceVersion(cur.GetResourceVersion())
				err = c.Update(ctx, obj)
			}
		}
		if err != nil {
			return fmt.Errorf("lws: webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// trackingServer is the manager's webhook server, recording which webhook paths
// have received a request (for Start's readiness probe).
type trackingServer struct {
	webhook.Server
	mu    sync.Mutex
	seen  map[string]bool
	paths []string // the webhook paths Start waits for
}

// Register implements webhook.Server.
func (s *trackingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.seen[path] = true
		s.mu.Unlock()
		hook.ServeHTTP(w, req)
	}))
}

// missing lists the registered webhook paths that have not been called yet.
func (s *trackingServer) missing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.paths {
		if !s.seen[p] {
			out = append(out, p)
		}
	}
	return out
}

// probeLWS is a minimal valid LeaderWorkerSet for a dry-run create.
func probeLWS() *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: probeNamespace},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:      ptr.To[int32](0),
			StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
			RolloutStrategy: lwsv1.RolloutStrategy{
				Type: lwsv1.RollingUpdateStrategyType,
				RollingUpdateConfiguration: &lwsv1.RollingUpdateConfiguration{
					Partition: ptr.To[int32](0), MaxUnavailable: intstr.FromInt32(1), MaxSurge: intstr.FromInt32(0),
				},
			},
			NetworkConfig: &lwsv1.NetworkConfig{SubdomainPolicy: ptr.To(lwsv1.SubdomainShared)},
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				Size:          ptr.To[int32](1),
				RestartPolicy: lwsv1.RecreateGroupOnPodRestart,
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "probe"}},
				}},
			},
		},
	}
}

// probeDisaggregatedSet is a minimal valid DisaggregatedSet (two roles of zero
// replicas) for a dry-run create. Like an LWS, a typed DisaggregatedSet must set
// startupPolicy and rolloutStrategy.type, which the CRD rejects as "".
func probeDisaggregatedSet() *disaggv1.DisaggregatedSet {
	role := func(name string) disaggv1.DisaggregatedRoleSpec {
		return disaggv1.DisaggregatedRoleSpec{Name: name, LeaderWorkerSetTemplateSpec: lwsv1.LeaderWorkerSetTemplateSpec{
			Spec: lwsv1.LeaderWorkerSetSpec{
				Replicas:        ptr.To[int32](0),
				StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
				RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
				LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
					Size:          ptr.To[int32](1),
					RestartPolicy: lwsv1.RecreateGroupOnPodRestart,
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "c", Image: "probe"}},
					}},
				},
			},
		}}
	}
	return &disaggv1.DisaggregatedSet{
		ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: probeNamespace},
		Spec:       disaggv1.DisaggregatedSetSpec{Roles: []disaggv1.DisaggregatedRoleSpec{role("a"), role("b")}},
	}
}

// probePod is a pod as LWS's leader StatefulSet would create it (minus the
// webhook's additions), for a dry-run create.
func probePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: probeName + "-0", Namespace: probeNamespace,
			Labels:      map[string]string{lwsv1.SetNameLabelKey: probeName, lwsv1.WorkerIndexLabelKey: "0"},
			Annotations: map[string]string{lwsv1.SizeAnnotationKey: "1"},
		},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "c", Image: "probe"}},
		},
	}
}

func ignoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// freePort returns a TCP port on 127.0.0.1 free a moment ago (freeport.Pick).
func freePort() (int, error) { return freeport.Pick() }
