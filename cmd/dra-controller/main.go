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

// Command dra-controller is the cluster side of the vgpu-dra driver: it
// serves the admission webhooks (validation of vGPU claims, the GPU-memory
// quota, HAMi-compatible pod translation), exports allocation metrics, and,
// as the elected leader, allocates gated pods' claims by placement policy
// and garbage-collects what the webhooks create.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/daemon"
)

func main() {
	daemon.Execute(newCommand())
}

func newCommand() *cobra.Command {
	opts := newOptions()
	return daemon.NewCobra(daemon.Command{
		Name:  "dra-controller",
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
ResourceClaimTemplates and quota usage records of deleted namespaces.
docs/controller.md describes the webhook configuration and RBAC.`,
		AddFlags:      opts.addFlags,
		UnprefixedEnv: []string{"kubeconfig", "pod-name", "pod-namespace"},
		Validate:      opts.validate,
		Run:           func(ctx context.Context) error { return run(ctx, opts) },
	})
}
