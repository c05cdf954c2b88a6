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

// Package apiprobe asks the API server, in dry runs, whether it keeps the
// fields of the feature gates the driver relies on (docs/install.md). An API
// server with a gate off accepts such objects and drops the fields without
// an error; dra-controller runs the probe at start and reports what it finds
// through pkg/common/apifeatures.
package apiprobe
