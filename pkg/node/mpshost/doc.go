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

// Package mpshost runs NVIDIA's MPS control program for the kubelet plugin
// from a pod of its own on the plugin's node, the mps-host pod (the chart's
// DaemonSet <release>-mps-host; docs/mps.md, where the daemons live). Both
// pods share the host's pid namespace, so a process is in the cgroup of the
// container that started it and dies when that container ends: daemons
// started by the mps-host pod outlive a plugin container that is killed or
// restarted and a plugin pod that is replaced, and the next plugin instance
// adopts them.
//
// Server is the host side: it listens on a unix socket under the state
// root, runs each requested invocation of the control program to its end
// and answers with its output and exit status; with Reap it is the child
// subreaper of the daemons that the control program forks into the
// background, and reaps them when they exit. Runner is the plugin's side,
// an mpsdaemon.Runner. The protocol (docs/architecture.md, MPS) is one
// JSON request and one JSON response per connection.
package mpshost
