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

package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/hostinstall"
)

func main() {
	fs := flag.NewFlagSet("vgpu-install", flag.ContinueOnError)
	source := fs.String("source", "/usr/lib/vgpu-dra/libvgpu.so", "libvgpu.so in the image.")
	dest := fs.String("destination", "/usr/local/vgpu/libvgpu.so",
		"Path of libvgpu.so on the host (as mounted in this container at the same path); must match the plugin's --libvgpu-path.")
	klog.InitFlags(fs)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: vgpu-install [flags]\n\nInstalls libvgpu.so onto the host as a versioned file and switches the destination link to it atomically.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "vgpu-install: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	ctx := klog.NewContext(context.Background(), klog.Background().WithName("vgpu-install"))
	if _, err := hostinstall.Install(ctx, *source, *dest); err != nil {
		klog.FromContext(ctx).Error(err, "Installing libvgpu.so failed", "source", *source, "destination", *dest)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
