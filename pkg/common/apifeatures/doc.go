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

// Package apifeatures names the Kubernetes feature gates the driver relies
// on and reports a cluster that lacks one. An API server without a gate
// accepts our objects and silently drops the gated fields (a ResourceSlice
// without allowMultipleAllocations makes every GPU exclusive, one pod per
// GPU, with no error anywhere), so both daemons read back what they wrote
// and report each gate they find off: a log line at error level, a Warning
// Event on an object an admin looks at (the node, the controller's pod) and
// the vgpu_dra_api_feature_missing metric.
package apifeatures
