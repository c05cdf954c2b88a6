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

// Package mpsdaemon runs NVIDIA's MPS control daemon
// (nvidia-cuda-mps-control) for one GPU on behalf of the kubelet plugin
// (docs/mps.md): Start starts it in the GPU's directory under the state
// root and sets its defaults, the ceiling of every client; Command and
// Read talk to it the way NVIDIA's tools do, one command per line on the
// control program's standard input; Adopt finds a daemon a previous
// plugin instance started, so that running clients keep their server;
// Quit stops it; Supervisor starts it again, with backoff, when it exits
// without being told to. A daemon is identified by its pid and start
// time, so that a reused pid is never taken for it.
//
// The tests run the whole lifecycle against a fake control program
// (mpsdaemontest) and against NVIDIA's real one, which starts without a GPU.
package mpsdaemon
