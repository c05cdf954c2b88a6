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

// Command kubectl-vgpu is the kubectl plugin of the vgpu.dra.dev driver:
// `kubectl vgpu nodes` shows every GPU with what is granted and used on it,
// `kubectl vgpu claims` every vGPU claim with its GPU, grant and use, and
// `kubectl vgpu why POD` why a Pending pod's vGPU claims fit nowhere and
// what single change would make them fit. It only reads. With the binary
// on PATH, kubectl finds it as `kubectl vgpu`; docs/kubectl-vgpu.md has
// examples of every output.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	cmd := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, nil)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
