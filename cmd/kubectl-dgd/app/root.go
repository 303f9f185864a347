// Package app implements kubectl-dgd, the kubectl plugin for DynamoGraphDeployment (DGD)
// rollouts. Stock "kubectl rollout" knows only Deployments, StatefulSets and DaemonSets;
// this plugin gives DGDs the same verbs with output shaped like kubectl's own:
//
//	kubectl dgd get NAME [--watch] [--no-color]
//	kubectl dgd rollout history NAME [--revision=N]
//	kubectl dgd rollout status NAME [--watch=true] [--timeout=0]
//	kubectl dgd rollout undo NAME [--to-revision=N] [--dry-run=none|client|server]
//	kubectl dgd rollout pause|resume|promote|abort|retry NAME
//	kubectl dgd rollout partition NAME VALUE
//	kubectl dgd set image NAME SERVICE=IMAGE... [--change-cause=TEXT]
//	kubectl dgd restart NAME [--id=ID]
//	kubectl dgd list [-A]
//	kubectl dgd analysis run TEMPLATE [--cluster-scope] --canary-namespace=NS [--stable-namespace=NS] [--arg NAME=VALUE]...
//	kubectl dgd completion bash|zsh|fish|powershell
//
// Connection flags (--kubeconfig, --context, -n/--namespace, --server...) are kubectl's,
// from k8s.io/cli-runtime's ConfigFlags. Commands are built by NewRootCommand from
// injectable IOStreams and ConfigFlags, so tests run them in-process against a real API
// server and compare their output with golden files. Every command that takes a DGD name
// (or a template name) completes it from the cluster (cobra's ValidArgsFunction; see complete.go).
package app

import (
	"context"
	"errors"
	"fmt"
	"io"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/revisions"
)

// resource is the DGD resource as the API server names it in errors
// ("dynamographdeployments.nvidia.com "x" not found").
var resource = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "dynamographdeployments"}

// NewRootCommand returns the kubectl-dgd command tree. Output goes to streams; flags
// supply the connection (its flags are added to the root command, so --kubeconfig, -n and
// the rest work on every subcommand, and a test may preset flags.KubeConfig). Commands
// return their errors rather than exit: print them with PrintError.
func NewRootCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-dgd",
		Short: "Manage DynamoGraphDeployment rollouts",
		Long: "kubectl dgd manages the rollouts of DynamoGraphDeployments (DGDs): history, status,\n" +
			"undo, pause, resume, partition (canary), promote, abort and retry, like kubectl rollout does for\n" +
			"Deployments and StatefulSets; get (a live tree of revisions, workloads and pods), set\n" +
			"image, restart and list; analysis run measures an analysis template once.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl dgd"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root.PersistentFlags())
	c := &cli{streams: streams, flags: flags}
	root.AddCommand(newGetCommand(c), newRolloutCommand(c), newSetCommand(c), newRestartCommand(c), newListCommand(c), newAnalysisCommand(c))
	return root
}

// newRolloutCommand groups the rollout verbs.
func newRolloutCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout SUBCOMMAND",
		Short: "Manage the rollout of a DynamoGraphDeployment's workers",
		Long: "Manage the rollout of a DynamoGraphDeployment's worker services. Every distinct\n" +
			"worker template is a numbered revision (a ControllerRevision owned by the DGD).",
	}
	cmd.AddCommand(newHistoryCommand(c), newStatusCommand(c), newUndoCommand(c),
		newPauseCommand(c), newResumeCommand(c), newPartitionCommand(c), newPromoteCommand(c),
		newAbortCommand(c), newRetryCommand(c))
	for _, sub := range cmd.Commands() {
		sub.ValidArgsFunction = c.completeName // every rollout verb takes a DGD name first
	}
	return cmd
}

// PrintError writes err as kubectl does: "Error from server (Reason): message" for an
// API error, "error: message" otherwise.
func PrintError(w io.Writer, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if reason := status.Status().Reason; reason != "" {
			fmt.Fprintf(w, "Error from server (%s): %v\n", reason, err)
			return
		}
	}
	fmt.Fprintf(w, "error: %v\n", err)
}

// PluginFieldManager is the field manager of the plugin's writes (set image, undo,
// pause...).
const PluginFieldManager = "kubectl-dgd"

// cli is what every command shares: the streams and the connection flags.
type cli struct {
	streams genericiooptions.IOStreams
	flags   *genericclioptions.ConfigFlags
}

// session is one command's connection: a client, the namespace, and the scheme the
// client decodes with.
type session struct {
	client    client.WithWatch
	namespace string
	scheme    *runtime.Scheme
}

// connect builds a client from the flags, and resolves the namespace as kubectl does
// (-n, else the kubeconfig context's, else "default").
func (c *cli) connect() (*session, error) {
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ns, _, err := c.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, lwsv1.AddToScheme, grovev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	// The API server names the field manager of a write without one after the user
	// agent: the plugin's writes are PluginFieldManager's, whatever the binary is called.
	cfg.UserAgent = PluginFieldManager
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	// DGDs are read and written as v1beta1 (the storage version) and converted here, as
	// the operator does: no conversion webhook round trip, no deprecation warning, and
	// the same answers whichever version a DGD was written in.
	return &session{client: conversion.NewWithWatch(cl), namespace: ns, scheme: scheme}, nil
}

// get reads the DGD name. A missing DGD is the API server's own NotFound error
// (dynamographdeployments.nvidia.com "name" not found), returned as is.
func (s *session) get(ctx context.Context, name string) (*v1alpha1.DynamoGraphDeployment, error) {
	dgd := &v1alpha1.DynamoGraphDeployment{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, dgd); err != nil {
		return nil, err
	}
	return dgd, nil
}

// history reads the DGD name and its revisions, oldest first (those it controls only).
func (s *session) history(ctx context.Context, name string) (*v1alpha1.DynamoGraphDeployment, []*appsv1.ControllerRevision, error) {
	dgd, err := s.get(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	revs, err := revisions.NewHistory(s.client, s.scheme).List(ctx, dgd)
	if err != nil {
		return nil, nil, err
	}
	return dgd, revs, nil
}

// ref is how kubectl names an object in its messages: dynamographdeployment.nvidia.com/name.
func ref(name string) string {
	return "dynamographdeployment." + v1alpha1.GroupVersion.Group + "/" + name
}

// exactlyOneName is the Args check of the commands that take one DGD name.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one DynamoGraphDeployment name, got %d arguments (see --help)",
			cmd.CommandPath(), len(args))
	}
	return nil
}
