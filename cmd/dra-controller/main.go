// Command dra-controller is the cluster side of the vgpu-dra driver: it
// serves the admission webhooks (validation of vGPU claims, the GPU-memory
// quota, HAMi-compatible pod translation), exports allocation metrics, and,
// as the elected leader, allocates gated pods' claims by placement policy
// and garbage-collects what the webhooks create.
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

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	opts := newOptions()
	logConfig := logsapi.NewLoggingConfiguration()

	cmd := &cobra.Command{
		Use:   "dra-controller",
		Short: "vgpu-dra controller: admission webhooks, HAMi compatibility, GPU quota, policy allocation and allocation metrics",
		Long: `dra-controller runs as a Deployment (two or more replicas). Every replica serves
the admission webhooks over HTTPS:

  ` + "/validate-resourceclaims" + `  ResourceClaims and ResourceClaimTemplates: strict check of
                            the VGPUConfig and of memory/cores requests, admin-only
                            DeviceClasses, per-namespace GPU quota
  ` + "/mutate-pods" + `              Pods written for HAMi (nvidia.com/gpu, gpumem, gpucores...)
                            become pods with DRA claims

  ` + "/gate-pods" + `                Pods whose claims use this driver's classes, where policy
                            allocation is on, get a scheduling gate

and exports allocation metrics on /metrics. One elected replica allocates the
claims of gated pods by policy (binpack or spread per node and per GPU, PCIe
root / NUMA locality for multi-GPU claims; docs/allocation.md), releases
allocations whose pods are gone, and deletes unused generated
ResourceClaimTemplates and quota ledgers of deleted namespaces.
docs/controller.md describes the webhook configuration and RBAC.

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
			logger := klog.Background().WithName("dra-controller")
			ctx = klog.NewContext(ctx, logger)
			err := run(ctx, opts)
			if err != nil && !errors.Is(err, context.Canceled) {
				logger.Error(err, "Controller stopped")
				return err
			}
			logger.Info("Controller stopped")
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
	flags.Mirror(fs, "VGPU_DRA", "kubeconfig", "pod-name", "pod-namespace")
	cliflag.SetUsageAndHelpFunc(cmd, named, 100)
	return cmd
}
