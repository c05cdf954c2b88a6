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

package image

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Config is the runtime configuration of the image. The Dockerfile states
// the same values; a test keeps the two in step.
type Config struct {
	Entrypoint []string
	User       string
	Env        []string
	Labels     map[string]string
}

// DefaultConfig returns the image configuration for a version.
func DefaultConfig(version string) Config {
	return Config{
		Entrypoint: []string{PluginPath},
		User:       strconv.Itoa(NonRootUID) + ":" + strconv.Itoa(NonRootUID),
		Env:        []string{"PATH=/usr/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "vgpu-dra-driver",
			"org.opencontainers.image.description": "Kubernetes DRA driver that shares NVIDIA GPUs with hard memory and compute limits",
			"org.opencontainers.image.source":      "https://github.com/vgpu-dra/vgpu-dra-driver",
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.version":     version,
		},
	}
}

// Build assembles a one-layer image from the entries. created stamps the
// image and every file, so equal inputs give an equal image digest.
func Build(entries []Entry, cfg Config, created time.Time) (v1.Image, error) {
	arch, err := architecture(entries)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := WriteLayer(&buf, entries, created); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "vgpu-dra imagebuild", Comment: "driver binaries, libvgpu.so and their C libraries"},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = cfg.Entrypoint
	cf.Config.User = cfg.User
	cf.Config.Env = cfg.Env
	cf.Config.Labels = maps.Clone(cfg.Labels)
	cf.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

// architecture returns the OCI architecture of the plugin binary.
func architecture(entries []Entry) (string, error) {
	for _, e := range entries {
		if e.Path != PluginPath {
			continue
		}
		f, err := elf.Open(e.Source)
		if err != nil {
			return "", fmt.Errorf("read ELF %s: %w", e.Source, err)
		}
		defer func() { _ = f.Close() }()
		switch f.Machine {
		case elf.EM_X86_64:
			return "amd64", nil
		case elf.EM_AARCH64:
			return "arm64", nil
		default:
			return "", fmt.Errorf("plugin binary %s: unsupported machine %s", e.Source, f.Machine)
		}
	}
	return "", fmt.Errorf("the image has no %s", PluginPath)
}

// WriteDockerArchive writes img as a `docker save` tar tagged ref, which
// `ctr images import` and `docker load` read.
func WriteDockerArchive(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
