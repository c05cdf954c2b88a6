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

// Package hostinstall installs a shared library onto the host filesystem so
// that containers started at any moment see either the old or the new
// version, never a partly written file.
//
// The library is written to a versioned name next to the destination
// (<name>.<content hash>), synced, and then the destination, a relative
// symlink, is switched to it with one rename. Containers bind-mount the
// destination path, which the runtime resolves at container start, so a
// running container keeps the version it started with even after the next
// install replaces the link and prunes old versions.
package hostinstall
