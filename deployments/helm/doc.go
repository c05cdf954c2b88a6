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

// Package chart holds the tests of the vgpu-dra-driver Helm chart in
// vgpu-dra-driver/: `helm lint` and `helm template` through Helm's own Go
// packages (no helm binary needed), rendered with the values files under
// examples/ and testdata/ and checked object by object, including the CEL
// of the admission policy evaluated against sample requests, the
// controller's generated serving certificate verified against the webhooks'
// caBundle, and upgrades rendered against a fake API server so that the
// templates' lookup of the existing TLS Secret is exercised.
package chart
