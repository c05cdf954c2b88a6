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

// Package e2e holds the end-to-end specs of vgpu-dra: they run against a real
// Kubernetes cluster of two nodes, each its own kubelet and containerd in its
// own namespaces (test/e2e/cluster.sh; E2E_NODES sets the count), with the driver
// installed by its Helm chart on simulated GPUs (test/e2e/driver.sh), and
// check what a user would see: ResourceSlices, pods sharing GPUs under hard
// limits, claim lifecycle, recovery from plugin crashes and node reboots,
// upgrades, and the controller's HAMi translation, quotas and policy
// allocation.
//
// The specs are behind the "e2e" build tag so that unit-test runs never
// need a cluster. `make e2e` brings the cluster up, runs them and tears it
// down; docs/e2e.md explains how to run single specs against a cluster that
// stays up.
package e2e
