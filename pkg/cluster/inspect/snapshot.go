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

package inspect

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Snapshot is the part of the cluster the views read, listed once so that
// every row of one output describes the same moment.
type Snapshot struct {
	Nodes []corev1.Node
	// Pods are pointers, so that a caller keeping them in an informer's
	// cache hands them over without copying ten thousand of them.
	Pods      []*corev1.Pod
	Slices    []resourceapi.ResourceSlice
	Claims    []resourceapi.ResourceClaim
	Classes   []resourceapi.DeviceClass
	Templates []resourceapi.ResourceClaimTemplate
}

// What selects the kinds of objects Load lists: each view needs only some.
type What struct {
	Nodes, Pods, Templates bool
}

// Load lists the objects of a Snapshot. Slices, claims and classes are
// always listed (cluster-wide: a GPU's allocation is the sum over all
// namespaces); the rest as what asks.
func Load(ctx context.Context, client kubernetes.Interface, what What) (*Snapshot, error) {
	s := &Snapshot{}
	opts := metav1.ListOptions{}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	s.Slices = slices.Items
	claims, err := client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	s.Claims = claims.Items
	classes, err := client.ResourceV1().DeviceClasses().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list DeviceClasses: %w", err)
	}
	s.Classes = classes.Items
	if what.Nodes {
		nodes, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list Nodes: %w", err)
		}
		s.Nodes = nodes.Items
	}
	if what.Pods {
		pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list Pods: %w", err)
		}
		s.Pods = make([]*corev1.Pod, len(pods.Items))
		for i := range pods.Items {
			s.Pods[i] = &pods.Items[i]
		}
	}
	if what.Templates {
		templates, err := client.ResourceV1().ResourceClaimTemplates(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list ResourceClaimTemplates: %w", err)
		}
		s.Templates = templates.Items
	}
	return s, nil
}
