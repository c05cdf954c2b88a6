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

// Package webview is the live web page of `kubectl vgpu ui`: one picture of
// the fleet now, built from the same rows `kubectl vgpu nodes|claims|why`
// print (pkg/cluster/inspect).
//
// A Source keeps the cluster's ResourceSlices, ResourceClaims, Pods, Nodes,
// DeviceClasses and ResourceClaimTemplates in client-go informers with the
// user's own credentials, and after every change (at most once per
// interval) builds a Model: per node and GPU the memory booked, used and
// granted as burst against capacity and the cores booked, the GPU's MIG
// instances, the claims on it, and the Pending pods that ask for this
// driver's devices with the `why` explanation. Handler serves it as HTML
// rendered from Go templates, with every asset embedded; a small script
// swaps in a fresh HTML fragment when the server-sent event stream says the
// model changed, so the page never reloads. Nothing here writes to the
// cluster.
package webview
