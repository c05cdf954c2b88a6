package gpu

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
