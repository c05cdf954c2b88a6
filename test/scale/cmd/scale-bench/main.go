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

// Command scale-bench drives the scale benchmark against a running control
// plane (test/scale/run.sh starts it; docs/scale.md):
//
//	scale-bench nodes  ...   create simulated GPU nodes and publish their ResourceSlices
//	scale-bench pods   ...   create the workload, measure it, check it, write the arm's result
//	scale-bench report ARM.json...   print the table, ratios and goals; fail on a correctness problem
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx = klog.NewContext(ctx, klog.Background())
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: scale-bench nodes|pods|report [flags]")
	}
	switch args[0] {
	case "nodes":
		return runNodes(ctx, args[1:])
	case "pods":
		return runPods(ctx, args[1:])
	case "report":
		return runReport(args[1:])
	default:
		return fmt.Errorf("unknown command %q: want nodes, pods or report", args[0])
	}
}
