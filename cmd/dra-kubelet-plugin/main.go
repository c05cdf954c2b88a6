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

// Command dra-kubelet-plugin is the node side of the vgpu-dra driver: it
// discovers the node's GPUs, publishes them as a ResourceSlice with
// consumable memory and cores, and prepares vGPU claims for containers by
// writing per-claim limits, shared regions and CDI specs.
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
		Name:  "dra-kubelet-plugin",
		Short: "vgpu-dra kubelet plugin: shares NVIDIA GPUs between pods with hard memory and compute limits",
		Long: `dra-kubelet-plugin runs on every GPU node (as a DaemonSet). It discovers the
node's GPUs through NVML, publishes them in a ResourceSlice with consumable
"memory" and "cores" capacity, and prepares allocated vGPU claims for the
kubelet: it writes each claim's limits and shared region under the state root
and a CDI spec that injects libvgpu.so, /etc/ld.so.preload, the limits and the
GPU itself into the claim's containers.`,
		AddFlags:      opts.addFlags,
		UnprefixedEnv: []string{"node-name", "kubeconfig", "pod-uid"},
		Validate:      opts.validate,
		Run: func(ctx context.Context) error {
			if opts.mpsHost {
				return runMPSHost(ctx, opts)
			}
			return run(ctx, opts)
		},
	})
}
