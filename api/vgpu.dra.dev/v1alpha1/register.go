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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group and version of VGPUConfig.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

var (
	// SchemeBuilder registers VGPUConfig and its defaulting function.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs)
	// AddToScheme adds VGPUConfig to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &VGPUConfig{})
	return nil
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&VGPUConfig{}, func(obj interface{}) {
		SetDefaults(obj.(*VGPUConfig))
	})
	return nil
}

// SetDefaults fills every empty field of c with its default and sets the
// type meta. MemoryLimit stays unset: no limit means the guarantee.
func SetDefaults(c *VGPUConfig) {
	c.APIVersion = SchemeGroupVersion.String()
	c.Kind = Kind
	if c.ComputePolicy == "" {
		c.ComputePolicy = DefaultComputePolicy
	}
	if c.Priority == "" {
		c.Priority = DefaultPriority
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.Enforcement == "" {
		c.Enforcement = DefaultEnforcement
	}
	if c.Burst == "" {
		c.Burst = DefaultBurst
	}
	if c.ReclaimGracePeriodSeconds == nil {
		grace := DefaultReclaimGracePeriodSeconds
		c.ReclaimGracePeriodSeconds = &grace
	}
}
