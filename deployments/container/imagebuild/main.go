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
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/deployments/container/image"
)

type options struct {
	inputs    image.Inputs
	version   string
	ref       string
	output    string
	rootfsDir string
	epoch     int64
}

func main() {
	opts, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild: %v\n", err)
		os.Exit(2)
	}
	ctx := klog.NewContext(context.Background(), klog.Background().WithName("imagebuild"))
	if err := run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "Building the image failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.StringVar(&o.inputs.Plugin, "plugin", "bin/dra-kubelet-plugin", "dra-kubelet-plugin binary.")
	fs.StringVar(&o.inputs.Controller, "controller", "", "dra-controller binary; empty leaves it out of the image.")
	fs.StringVar(&o.inputs.KubectlVGPU, "kubectl-vgpu", "", "kubectl-vgpu plugin binary (statically linked); empty leaves it out of the image.")
	fs.StringVar(&o.inputs.Installer, "installer", "bin/vgpu-install", "vgpu-install binary (statically linked).")
	fs.StringVar(&o.inputs.Libvgpu, "libvgpu", "vgpu-core/build/libvgpu.so", "libvgpu.so.")
	fs.StringVar(&o.version, "version", "dev", "Version recorded in the image label org.opencontainers.image.version.")
	fs.StringVar(&o.ref, "tag", "", "Image reference (registry/repository:tag) recorded in the tar; required with --output.")
	fs.StringVar(&o.output, "output", "", "Write the image as a docker-save tar to this file.")
	fs.StringVar(&o.rootfsDir, "rootfs-dir", "", "Write the image's files into this (new or empty) directory.")
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		epoch = "0"
	}
	fs.Func("source-date-epoch", "Timestamp (Unix seconds) of the image and its files, for reproducible builds; default $SOURCE_DATE_EPOCH or 0.", func(s string) error {
		epoch = s
		return nil
	})
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.epoch, err = strconv.ParseInt(epoch, 10, 64); err != nil || o.epoch < 0 {
		return o, fmt.Errorf("source-date-epoch: %q is not a non-negative number of seconds", epoch)
	}
	if o.output == "" && o.rootfsDir == "" {
		return o, errors.New("nothing to do: give --output and/or --rootfs-dir")
	}
	if o.output != "" && o.ref == "" {
		return o, errors.New("tag: required with --output")
	}
	return o, nil
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	entries, err := image.Contents(o.inputs)
	if err != nil {
		return err
	}
	if o.rootfsDir != "" {
		if err := image.WriteRootfs(o.rootfsDir, entries); err != nil {
			return err
		}
		logger.Info("Wrote root filesystem", "dir", o.rootfsDir, "entries", len(entries))
	}
	if o.output == "" {
		return nil
	}
	img, err := image.Build(entries, image.DefaultConfig(o.version), time.Unix(o.epoch, 0).UTC())
	if err != nil {
		return err
	}
	if err := image.WriteDockerArchive(o.output, o.ref, img); err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("image ID: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image digest: %w", err)
	}
	logger.Info("Wrote image", "file", o.output, "tag", o.ref, "id", id.String(), "manifestDigest", digest.String())
	return nil
}
