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
