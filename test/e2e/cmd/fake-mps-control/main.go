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

// Command fake-mps-control is the simulated nodes' nvidia-cuda-mps-control:
// the e2e harness installs it in the fake driver root, where the kubelet
// plugin's --mps finds the driver's own program. It is the fake the
// supervisor's tests use (package mpsdaemontest), which answers the
// commands the plugin sends the way NVIDIA's daemon does.
package main

import (
	"os"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon/mpsdaemontest"
)

func main() {
	os.Exit(mpsdaemontest.Run(os.Args[1:]))
}
