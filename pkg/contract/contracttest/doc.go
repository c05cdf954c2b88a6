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

// Package contracttest runs libvgpu.so's own parsers of the contract files
// (vgpu-core/tools/contract-parse.c, compiled with the library's units) for
// the cross-language tests of the packages under pkg/contract/: each feeds
// the same golden and hostile files to its Go parser and to the C one, and
// requires that they agree.
package contracttest
