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

// Package discoverytest provides go-nvml's DGX H200 mock server with the calls
// filled in that pkg/node/discovery needs and the mock leaves unset (PCI bus id, NUMA
// node, device attributes, XID event registration). It serves the tests of
// pkg/node/discovery and of the components built on it, and is imported by tests only.
// EnableMIG adds the MIG create/destroy calls and error codes the mock lacks.
package discoverytest
