/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/version"
)

// clientFunc makes the API client; tests replace it with a fake clientset.
type clientFunc func() (kubernetes.Interface, error)

// options are the flags every subcommand shares: the standard kubectl
// connection flags (kubeconfig, context, namespace, ...) and -o.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	client  clientFunc
	output  string
}

func newRootCommand(streams genericiooptions.IOStreams, client clientFunc) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams, client: client}
	if o.client == nil {
		o.client = func() (kubernetes.Interface, error) {
			cfg, err := o.flags.ToRESTConfig()
			if err != nil {
				return nil, fmt.Errorf("kubeconfig: %w", err)
			}
			// Every type read is built in, so lists come as protobuf: at
			// a thousand nodes and ten thousand pods that decodes several
			// times faster than JSON and with far less garbage.
			cfg.ContentType = runtime.ContentTypeProtobuf
			cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
			return kubernetes.NewForConfig(cfg)
		}
	}
	root := &cobra.Command{
		Use:   "kubectl-vgpu",
		Short: "Who uses which shared GPU, and why a pod is Pending (vgpu.dra.dev)",
		Long: "kubectl vgpu reads the vgpu.dra.dev driver's ResourceSlices and the ResourceClaims\n" +
			"that use them and prints, like kubectl top, who uses what on which GPU; `why POD`\n" +
			"runs the scheduler's structured allocator in dry run to explain a Pending pod.\n" +
			"It never writes to the cluster.",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl vgpu"},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: wide, json or yaml (default: a table)")
	root.AddCommand(o.nodesCommand(), o.claimsCommand(), o.whyCommand(), o.uiCommand())
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return o.validate() }
	return root
}

func (o *options) validate() error {
	switch o.output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q: must be wide, json or yaml", o.output)
}

func (o *options) wide() bool { return o.output == "wide" }

// namespace is the namespace of the flags or the kubeconfig's context.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace: %w", err)
	}
	return ns, nil
}

func (o *options) snapshot(ctx context.Context, what inspect.What) (*inspect.Snapshot, error) {
	client, err := o.client()
	if err != nil {
		return nil, err
	}
	return inspect.Load(ctx, client, what)
}

// printObject writes v as JSON or YAML; ok is false for table formats.
func (o *options) printObject(v any) (bool, error) {
	switch o.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return true, fmt.Errorf("encode JSON: %w", err)
		}
		_, err = fmt.Fprintf(o.streams.Out, "%s\n", b)
		return true, err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, fmt.Errorf("encode YAML: %w", err)
		}
		_, err = o.streams.Out.Write(b)
		return true, err
	}
	return false, nil
}

// list is the JSON/YAML shape of a table: a kind and its rows.
type list[T any] struct {
	Kind  string `json:"kind"`
	Items []T    `json:"items"`
}

func (o *options) nodesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "nodes",
		Short: "Every GPU of every node: capacity, allocated, used, claims, taints and health",
		Example: "  kubectl vgpu nodes\n" +
			"  kubectl vgpu nodes -o wide",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			snap, err := o.snapshot(c.Context(), inspect.What{Nodes: true})
			if err != nil {
				return err
			}
			rows := inspect.Nodes(snap)
			if done, err := o.printObject(list[inspect.GPURow]{Kind: "GPUList", Items: rows}); done {
				return err
			}
			return inspect.PrintNodes(o.streams.Out, rows, o.wide())
		},
	}
}

func (o *options) claimsCommand() *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "claims",
		Short: "Every vGPU claim: pods, node, GPU, memory and cores granted, memory used and peak, refusals, SM use",
		Example: "  kubectl vgpu claims -n team-a\n" +
			"  kubectl vgpu claims -A -o wide",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ns := ""
			if !all {
				var err error
				if ns, err = o.namespace(); err != nil {
					return err
				}
			}
			snap, err := o.snapshot(c.Context(), inspect.What{})
			if err != nil {
				return err
			}
			rows := inspect.Claims(snap, ns)
			if done, err := o.printObject(list[inspect.ClaimRow]{Kind: "VGPUClaimList", Items: rows}); done {
				return err
			}
			if len(rows) == 0 && !all {
				_, err := fmt.Fprintf(o.streams.ErrOut, "No vGPU claims found in %s namespace.\n", ns)
				return err
			}
			return inspect.PrintClaims(o.streams.Out, rows, all, o.wide())
		},
	}
	c.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the claims of all namespaces")
	return c
}

func (o *options) whyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "why POD",
		Short: "Why a Pending pod's vGPU claims fit nowhere, per node and GPU, and what change would make them fit",
		Long: "why runs the structured allocator of k8s.io/dynamic-resource-allocation, as the\n" +
			"scheduler and the dra-controller do, in dry run over the cluster's ResourceSlices and\n" +
			"current allocations, and says per node and per GPU why each claim does not fit and\n" +
			"which single change would make it fit. It writes nothing.",
		Example: "  kubectl vgpu why -n team-a trainer-0\n" +
			"  kubectl vgpu why trainer-0 -o wide   # also the GPUs where a request fits",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			snap, err := o.snapshot(c.Context(), inspect.What{Nodes: true, Pods: true, Templates: true})
			if err != nil {
				return err
			}
			exp, err := inspect.Why(c.Context(), snap, ns, args[0])
			if err != nil {
				return err
			}
			if done, err := o.printObject(exp); done {
				return err
			}
			return inspect.PrintWhy(o.streams.Out, exp, o.wide())
		},
	}
}
