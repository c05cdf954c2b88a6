package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/hostinstall"
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
