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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

const (
	// Vendor is the CDI vendor of the per-claim specs.
	Vendor = names.CDIVendor
	// Class is the CDI class of the per-claim specs.
	Class = "claim"
	// Kind is the CDI kind (vendor/class) of the per-claim specs.
	Kind = Vendor + "/" + Class

	// specExt fixes the encoding so that the spec's path is known without
	// asking the cache.
	specExt = ".json"
)

// ClaimSpecs writes and removes the transient CDI specs of claims in one CDI
// spec directory.
type ClaimSpecs struct {
	dir   string
	cache *cdi.Cache
}

// NewClaimSpecs returns a writer for claim specs in dir (normally
// /var/run/cdi). The directory is created when the first spec is written.
func NewClaimSpecs(dir string) (*ClaimSpecs, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("CDI root %q must be an absolute path", dir)
	}
	// Auto-refresh would watch the directory and rescan it on every write;
	// this writer never reads devices back, so it is turned off.
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("create CDI cache for %s: %w", dir, err)
	}
	return &ClaimSpecs{dir: dir, cache: cache}, nil
}

// QualifiedName returns the CDI device ID ("k8s.vgpu.dra.dev/claim=<name>")
// for a device name of a claim spec.
func QualifiedName(deviceName string) string {
	return parser.QualifiedName(Vendor, Class, deviceName)
}

// specName is the file name of the transient spec of a claim.
func specName(claimUID string) string {
	return cdi.GenerateTransientSpecName(Vendor, Class, claimUID) + specExt
}

// Path returns the file that holds the spec of the claim.
func (c *ClaimSpecs) Path(claimUID string) string {
	return filepath.Join(c.dir, specName(claimUID))
}

// Exists reports whether the claim's spec file is present.
func (c *ClaimSpecs) Exists(claimUID string) (bool, error) {
	_, err := os.Stat(c.Path(claimUID))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("check CDI spec of claim %s: %w", claimUID, err)
	}
}

// Write validates and atomically writes (replacing any previous version) the
// spec of the claim: common edits, applied once whichever of its devices a
// container gets, and the devices. The spec version is the lowest one that
// can express them, so older runtimes can read it.
func (c *ClaimSpecs) Write(claimUID string, common cdispec.ContainerEdits, devices []cdispec.Device) error {
	spec := &cdispec.Spec{
		Kind:           Kind,
		Devices:        devices,
		ContainerEdits: common,
	}
	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("determine CDI spec version for claim %s: %w", claimUID, err)
	}
	spec.Version = version
	if err := c.cache.WriteSpec(spec, specName(claimUID)); err != nil {
		return fmt.Errorf("write CDI spec for claim %s: %w", claimUID, err)
	}
	return nil
}

// Remove deletes the spec of the claim; a missing spec is not an error.
func (c *ClaimSpecs) Remove(claimUID string) error {
	if err := c.cache.RemoveSpec(specName(claimUID)); err != nil {
		return fmt.Errorf("remove CDI spec of claim %s: %w", claimUID, err)
	}
	return nil
}
