// Command dra-kubelet-plugin is the node side of the vgpu-dra driver: it
// discovers the node's GPUs, publishes them as a ResourceSlice with
// consumable memory and cores, and prepares vGPU claims for containers by
// writing per-claim limits, shared regions and CDI specs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/flags"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/version"
)

// driverName is the DRA driver name and opaque-config API group (DESIGN.md).
const driverName = "vgpu.dra.dev"

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	opts := newOptions()
	logConfig := logsapi.NewLoggingConfiguration()

	cmd := &cobra.Command{
		Use:   "dra-kubelet-plugin",
		Short: "vgpu-dra kubelet plugin: shares NVIDIA GPUs between pods with hard memory and compute limits",
		Long: `dra-kubelet-plugin runs on every GPU node (as a DaemonSet). It discovers the
node's GPUs through NVML, publishes them in a ResourceSlice with consumable
"memory" and "cores" capacity, and prepares allocated vGPU claims for the
kubelet: it writes each claim's limits and shared region under the state root
and a CDI spec that injects libvgpu.so, /etc/ld.so.preload, the limits and the
GPU itself into the claim's containers.

Every flag can also be set by the environment variable shown next to it; a
flag given on the command line wins.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flags.Apply(cmd.Flags()); err != nil {
				return err
			}
			if err := logsapi.ValidateAndApply(logConfig, nil); err != nil {
				return fmt.Errorf("logging configuration: %w", err)
			}
			if err := opts.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			logger := klog.Background().WithName("dra-kubelet-plugin")
			ctx = klog.NewContext(ctx, logger)
			err := run(ctx, opts)
			if err != nil && !errors.Is(err, context.Canceled) {
				logger.Error(err, "Plugin stopped")
				return err
			}
			logger.Info("Plugin stopped")
			return nil
		},
	}

	var named cliflag.NamedFlagSets
	opts.addFlags(&named)
	logsapi.AddFlags(logConfig, named.FlagSet("logging"))
	fs := cmd.Flags()
	for _, name := range named.Order {
		fs.AddFlagSet(named.FlagSets[name])
	}
	flags.Mirror(fs, "VGPU_DRA", "node-name", "kubeconfig", "pod-uid")
	cliflag.SetUsageAndHelpFunc(cmd, named, 100)
	return cmd
}
