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

package claimcdi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"k8s.io/klog/v2"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// DefaultVendorKind is the kind of the spec that "nvidia-ctk cdi generate"
// writes.
const DefaultVendorKind = "nvidia.com/gpu"

// SpecDirSource takes the GPU base edits from a vendor CDI spec that already
// exists in the CDI spec directories, for example one generated with
// "nvidia-ctk cdi generate --device-name-strategy=uuid". The device must be
// named by its UUID; the spec's common edits are added to the device's own.
type SpecDirSource struct {
	kind string
	dirs []string

	// mu serialises refresh-and-lookup so that concurrent callers see one
	// consistent scan.
	mu    sync.Mutex
	cache *cdi.Cache
}

var _ GPUEditsSource = (*SpecDirSource)(nil)

// NewSpecDirSource returns a source that looks up devices of the given kind
// (e.g. "nvidia.com/gpu") in dirs, in increasing priority as in the CDI
// library.
func NewSpecDirSource(kind string, dirs []string) (*SpecDirSource, error) {
	vendor, class := parser.ParseQualifier(kind)
	if err := parser.ValidateVendorName(vendor); err != nil {
		return nil, fmt.Errorf("vendor CDI kind %q: %w", kind, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return nil, fmt.Errorf("vendor CDI kind %q: %w", kind, err)
	}
	if len(dirs) == 0 {
		return nil, errors.New("vendor CDI spec directories: at least one directory is required")
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("vendor CDI spec directory %q must be an absolute path", d)
		}
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("create CDI cache for %v: %w", dirs, err)
	}
	return &SpecDirSource{kind: kind, dirs: dirs, cache: cache}, nil
}

// ContainerEdits returns the edits of device <kind>=<uuid> and the common
// edits of the spec that defines it. The directories are rescanned
// on every call so that a regenerated vendor spec (driver upgrade) is used
// without restarting the plugin.
func (s *SpecDirSource) ContainerEdits(ctx context.Context, uuid string) (*GPUEdits, error) {
	logger := klog.FromContext(ctx)
	name := s.kind + "=" + uuid

	s.mu.Lock()
	defer s.mu.Unlock()

	// Refresh reports problems of every spec in the directories; only those
	// matter when the wanted device is missing, so they are kept for that
	// error.
	refreshErr := s.cache.Refresh()
	dev := s.cache.GetDevice(name)
	if dev == nil {
		err := fmt.Errorf("CDI device %q not found in %v (generate the vendor spec with --device-name-strategy=uuid)", name, s.dirs)
		if refreshErr != nil {
			err = fmt.Errorf("%w; spec errors: %w", err, refreshErr)
		}
		return nil, err
	}
	spec := dev.GetSpec()
	logger.V(5).Info("Using vendor CDI spec for GPU", "device", name, "spec", spec.GetPath())
	return &GPUEdits{Device: dev.ContainerEdits, Common: spec.ContainerEdits}, nil
}
