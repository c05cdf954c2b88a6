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

// Package atomicfile replaces files so that a reader sees either the old or
// the new content, never a partly written file, also after a crash of the
// writer: the content goes to a temporary file next to the target, is synced,
// renamed over the target, and the directory is synced so the rename itself
// survives a power loss.
//
// The claim manager (configs, checkpoint, preload file), the host-pid mapper
// and the host installer of libvgpu.so all write through it. Temporary files
// are named <name>.tmp-<random>; RemoveTemps deletes the ones a crash left.
package atomicfile
