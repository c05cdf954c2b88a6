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

package discovery

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Option configures how NVML is reached.
type Option func(*options)

type options struct {
	libraryPath string
	lib         nvml.Interface
}

// WithLibraryPath loads NVML from path instead of searching the dynamic
// loader path for libnvidia-ml.so.1. Ignored when WithNVML is given.
func WithLibraryPath(path string) Option {
	return func(o *options) { o.libraryPath = path }
}

// WithNVML uses lib instead of loading NVML; tests pass go-nvml's mocks, and
// callers share one library between discovery and health watching.
func WithNVML(lib nvml.Interface) Option {
	return func(o *options) { o.lib = lib }
}

// NewNVML returns the go-nvml library selected by opts.
func NewNVML(opts ...Option) nvml.Interface {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.lib != nil {
		return o.lib
	}
	if o.libraryPath != "" {
		return nvml.New(nvml.WithLibraryPath(o.libraryPath))
	}
	return nvml.New()
}
