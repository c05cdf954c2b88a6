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

// Package image defines the content of the vgpu-dra driver image and writes
// it either as a docker-save tar (for clusters without a registry or a
// container build engine, such as the project's e2e cluster) or as a root
// filesystem directory that the Dockerfile copies into a scratch image. Both
// come from one list of entries, so both images hold the same files given
// the same build outputs.
//
// The image is distroless in spirit: the binaries, libvgpu.so (as a payload
// that the init container installs on the host), the C libraries the
// dynamically linked binaries load, and the few files a process expects
// (/etc/passwd, /etc/group, /tmp); no shell and no package manager.
package image
