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

package admission

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// foreignDriver is the driver of the device a class must not match to be
// this driver's; a valid driver name that no one uses.
const foreignDriver = "not-vgpu.invalid"

// ClassMatcher decides which DeviceClasses allocate this driver's GPUs:
// those named explicitly (Names), those whose config targets this driver,
// and those whose selectors pick this driver's devices.
//
// The selectors are evaluated with the CEL library the scheduler's
// allocator uses, so the decision does not depend on how an expression is
// spelled (quotes, spaces, operand order, `in`, ...). A class picks this
// driver's devices when, against a device of this driver without
// attributes, no selector is false (true, or an error because it looks at
// an attribute: it can match some of our devices), while against a device
// of another driver some selector is false or fails (it does restrict the
// driver). A class without selectors matches every driver's devices and is
// not this driver's unless named.
type ClassMatcher struct {
	DriverName string
	Names      sets.Set[string]
	// Classes may be nil; then only Names match.
	Classes resourcelisters.DeviceClassLister

	celOnce  sync.Once
	celCache *cel.Cache
}

func (m *ClassMatcher) initCEL() {
	m.celCache = cel.NewCache(100, cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})
}

// IsOurs reports whether name is one of this driver's classes.
func (m *ClassMatcher) IsOurs(name string) bool {
	if m.Names.Has(name) || m.IsMPS(name) {
		return true
	}
	if m.Classes == nil {
		return false
	}
	class, err := m.Classes.Get(name)
	if err != nil {
		return false
	}
	return m.ClassIsOurs(class)
}

// ClassIsOurs reports whether class allocates this driver's devices.
func (m *ClassMatcher) ClassIsOurs(class *resourceapi.DeviceClass) bool {
	for _, c := range class.Spec.Config {
		if c.Opaque != nil && c.Opaque.Driver == m.DriverName {
			return true
		}
	}
	if len(class.Spec.Selectors) == 0 {
		return false
	}
	m.celOnce.Do(m.initCEL)
	ours := cel.Device{Driver: m.DriverName}
	foreign := cel.Device{Driver: foreignDriver}
	restrictsDriver := false
	for _, s := range class.Spec.Selectors {
		if s.CEL == nil {
			continue
		}
		compiled := m.celCache.GetOrCompile(s.CEL.Expression)
		if compiled.Error != nil {
			// The API server validates selectors; one that does not
			// compile matches nothing, so the class allocates nothing.
			return false
		}
		if matches, _, err := compiled.DeviceMatches(context.Background(), ours); err == nil && !matches {
			return false
		}
		if matches, _, err := compiled.DeviceMatches(context.Background(), foreign); err != nil || !matches {
			restrictsDriver = true
		}
	}
	return restrictsDriver
}

// BurstPolicy returns the burst policy that the DeviceClass name's configs
// of this driver set (the last one that sets it), or "" when none does or
// the class cannot be read (no lister, class not found, config that does
// not decode: the kubelet plugin resolves the configs again at prepare).
func (m *ClassMatcher) BurstPolicy(name string) api.BurstPolicy {
	if m.Classes == nil {
		return ""
	}
	class, err := m.Classes.Get(name)
	if err != nil {
		return ""
	}
	var policy api.BurstPolicy
	for _, c := range class.Spec.Config {
		if c.Opaque == nil || c.Opaque.Driver != m.DriverName {
			continue
		}
		cfg, err := api.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			continue
		}
		if cfg.Burst != "" {
			policy = cfg.Burst
		}
	}
	return policy
}

// IsMPS reports whether the DeviceClass name allocates this driver's MPS
// devices (docs/mps.md): the class names.MPSDeviceClass, or a class whose
// selectors, evaluated like ClassIsOurs's, pick a device of this driver
// that carries the mps attribute and refuse one that does not.
func (m *ClassMatcher) IsMPS(name string) bool {
	if name == names.MPSDeviceClass {
		return true
	}
	if m.Classes == nil {
		return false
	}
	class, err := m.Classes.Get(name)
	if err != nil || len(class.Spec.Selectors) == 0 {
		return false
	}
	m.celOnce.Do(m.initCEL)
	mps := cel.Device{Driver: m.DriverName, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		resourceapi.QualifiedName(m.DriverName + "/" + string(names.AttrMPS)): {BoolValue: ptr.To(true)},
	}}
	plain := cel.Device{Driver: m.DriverName}
	refusesPlain := false
	for _, s := range class.Spec.Selectors {
		if s.CEL == nil {
			continue
		}
		compiled := m.celCache.GetOrCompile(s.CEL.Expression)
		if compiled.Error != nil {
			return false
		}
		mpsMatches, _, mpsErr := compiled.DeviceMatches(context.Background(), mps)
		if mpsErr == nil && !mpsMatches {
			return false
		}
		// A selector that fails only without the attribute reads it
		// (device.attributes[...].mps), which refuses the plain device.
		if plainMatches, _, plainErr := compiled.DeviceMatches(context.Background(), plain); (plainErr == nil && !plainMatches) || (plainErr != nil && mpsErr == nil) {
			refusesPlain = true
		}
	}
	return refusesPlain
}
