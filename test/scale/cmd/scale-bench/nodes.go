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
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/test/scale"
)

// runNodes creates the simulated nodes and publishes each node's pool the
// way the kubelet plugin does: devices.DriverResources from the node's
// discovery.Info values, handed to the ResourceSlice controller of
// k8s.io/dynamic-resource-allocation with the Node as owner.
func runNodes(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet("nodes", pflag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the benchmark's API server")
	nodes := fs.Int("nodes", 1000, "number of simulated nodes")
	gpus := fs.Int("gpus", 8, "simulated GPUs per node")
	workers := fs.Int("workers", 16, "nodes published in parallel")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes <= 0 || *gpus <= 0 || *workers <= 0 {
		return fmt.Errorf("--nodes, --gpus and --workers must be positive")
	}
	client, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	// No sysfs entries: as on a simulated node, no PCIe root is published.
	sysfs, err := os.MkdirTemp("", "scale-sysfs-")
	if err != nil {
		return fmt.Errorf("empty sysfs root: %w", err)
	}
	defer func() { _ = os.RemoveAll(sysfs) }()
	opts := scale.SliceOptions(sysfs)

	logger := klog.FromContext(ctx)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(*workers)
	for i := range *nodes {
		g.Go(func() error { return publishNode(gctx, client, i, *gpus, opts) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	logger.Info("Nodes created and slices published", "nodes", *nodes, "gpus", *nodes**gpus, "elapsed", time.Since(start).Round(time.Millisecond))

	// KWOK marks the nodes Ready; the scheduler ignores them until then.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scale.NodeTypeLabel + "=" + scale.NodeTypeValue})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= *nodes, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for KWOK to report %d nodes Ready: %w", *nodes, err)
	}
	logger.Info("Nodes Ready", "nodes", *nodes, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

func publishNode(ctx context.Context, client kubernetes.Interface, i, gpus int, opts devices.Options) error {
	node, err := client.CoreV1().Nodes().Create(ctx, scale.Node(i), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = client.CoreV1().Nodes().Get(ctx, scale.NodeName(i), metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", scale.NodeName(i), err)
	}
	resources := devices.DriverResources(node.Name, scale.GPUs(i, gpus), opts)
	want := int64(len(resources.Pools[node.Name].Slices))
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: names.DriverName,
		KubeClient: client,
		Owner:      &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID},
		Resources:  &resources,
	})
	if err != nil {
		return fmt.Errorf("node %s: ResourceSlice controller: %w", node.Name, err)
	}
	defer ctrl.Stop()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return ctrl.GetStats().NumCreates >= want, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: publishing %d ResourceSlice(s): %w", node.Name, want, err)
	}
	return nil
}
