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

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform"
	transformroot "github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform/root"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// NVCDIOptions configures NVCDISource.
type NVCDIOptions struct {
	// DriverRoot is where the plugin sees the NVIDIA driver installation
	// ("/" on the host, or the mount point of the host's driver root when
	// the plugin runs in a container).
	DriverRoot string
	// HostDriverRoot is the same directory as seen by the container runtime
	// on the host; paths in the edits are rewritten from DriverRoot to it.
	// Empty means DriverRoot.
	HostDriverRoot string
	// DevRoot is where the plugin sees the driver's device nodes. Empty
	// means DriverRoot.
	DevRoot string
	// NVIDIACDIHookPath is the host path of nvidia-cdi-hook used by the
	// hooks in the edits. Empty means the toolkit's default.
	NVIDIACDIHookPath string
	// NVML overrides the NVML library (tests); nil loads libnvidia-ml.so.1
	// from the driver root.
	NVML nvml.Interface
}

// NVCDISource generates GPU base edits with NVIDIA Container Toolkit's nvcdi
// library: the full-GPU device edits for a UUID plus the common edits
// (control devices, driver libraries, IPC sockets, hooks).
type NVCDISource struct {
	lib         nvcdi.Interface
	transformer transform.Transformer

	// mu serialises calls into nvcdi, which initialises and shuts down NVML
	// around every device query.
	mu sync.Mutex
	// common caches the common edits: they depend only on the installed
	// driver, which cannot change while the plugin runs on it.
	common *cdispec.ContainerEdits
}

var _ GPUEditsSource = (*NVCDISource)(nil)

// NewNVCDISource creates the nvcdi library in NVML mode. Nothing is queried
// until the first ContainerEdits call, so a node whose driver is still
// loading can start the plugin.
func NewNVCDISource(ctx context.Context, opts NVCDIOptions) (*NVCDISource, error) {
	if opts.DriverRoot == "" {
		return nil, errors.New("nvcdi: driver root is required")
	}
	for name, p := range map[string]string{
		"driver root":          opts.DriverRoot,
		"host driver root":     opts.HostDriverRoot,
		"dev root":             opts.DevRoot,
		"nvidia-cdi-hook path": opts.NVIDIACDIHookPath,
	} {
		if p != "" && !filepath.IsAbs(p) {
			return nil, fmt.Errorf("nvcdi: %s %q must be an absolute path", name, p)
		}
	}
	hostRoot := opts.HostDriverRoot
	if hostRoot == "" {
		hostRoot = opts.DriverRoot
	}
	devRoot := opts.DevRoot
	if devRoot == "" {
		devRoot = opts.DriverRoot
	}

	nvcdiOpts := []nvcdi.Option{
		nvcdi.WithLogger(toolkitLogger{logger: klog.FromContext(ctx).WithName("nvcdi")}),
		nvcdi.WithMode(nvcdi.ModeNvml),
		nvcdi.WithDriverRoot(opts.DriverRoot),
		nvcdi.WithDevRoot(devRoot),
	}
	if opts.NVIDIACDIHookPath != "" {
		nvcdiOpts = append(nvcdiOpts, nvcdi.WithNVIDIACDIHookPath(opts.NVIDIACDIHookPath))
	}
	if opts.NVML != nil {
		nvcdiOpts = append(nvcdiOpts, nvcdi.WithNvmlLib(opts.NVML))
	}
	lib, err := nvcdi.New(nvcdiOpts...)
	if err != nil {
		return nil, fmt.Errorf("create nvcdi library for driver root %s: %w", opts.DriverRoot, err)
	}
	return &NVCDISource{
		lib: lib,
		transformer: transformroot.NewDriverTransformer(
			transformroot.WithDriverRoot(opts.DriverRoot),
			transformroot.WithTargetDriverRoot(hostRoot),
			transformroot.WithDevRoot(devRoot),
		),
	}, nil
}

// ContainerEdits returns the edits for the full GPU with the given UUID.
func (s *NVCDISource) ContainerEdits(ctx context.Context, uuid string) (*GPUEdits, error) {
	logger := klog.FromContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()

	devices, err := s.lib.GetDeviceSpecsByID(uuid)
	if err != nil {
		return nil, fmt.Errorf("nvcdi: generate edits for GPU %s: %w", uuid, err)
	}
	if len(devices) != 1 {
		return nil, fmt.Errorf("nvcdi: expected one device for GPU %s, got %d", uuid, len(devices))
	}
	if s.common == nil {
		common, err := s.lib.GetCommonEdits()
		if err != nil {
			return nil, fmt.Errorf("nvcdi: generate common edits: %w", err)
		}
		edits, err := s.toHost(cdispec.Spec{ContainerEdits: *common.ContainerEdits})
		if err != nil {
			return nil, err
		}
		s.common = &edits.ContainerEdits
		logger.V(4).Info("Generated common GPU edits", "mounts", len(s.common.Mounts), "deviceNodes", len(s.common.DeviceNodes), "hooks", len(s.common.Hooks))
	}
	device, err := s.toHost(cdispec.Spec{Devices: devices})
	if err != nil {
		return nil, err
	}
	return &GPUEdits{Device: device.Devices[0].ContainerEdits, Common: *s.common}, nil
}

// toHost rewrites every path in spec from the plugin's view of the driver
// root to the host's. The transformer works on whole specs and modifies
// them in place, so it is only ever given freshly generated edits.
func (s *NVCDISource) toHost(spec cdispec.Spec) (*cdispec.Spec, error) {
	if err := s.transformer.Transform(&spec); err != nil {
		return nil, fmt.Errorf("nvcdi: rewrite paths for the host driver root: %w", err)
	}
	return &spec, nil
}

// toolkitLogger adapts a klog logger to the toolkit's printf-style logger.
type toolkitLogger struct {
	logger klog.Logger
}

func (l toolkitLogger) Debugf(format string, args ...any) {
	l.logger.V(5).Info(fmt.Sprintf(format, args...))
}

func (l toolkitLogger) Errorf(format string, args ...any) {
	l.logger.Error(nil, fmt.Sprintf(format, args...))
}

func (l toolkitLogger) Infof(format string, args ...any) {
	l.logger.V(2).Info(fmt.Sprintf(format, args...))
}

// Warningf logs at V(1): the toolkit warns about every optional driver
// component it does not find, which is normal on most nodes.
func (l toolkitLogger) Warningf(format string, args ...any) {
	l.logger.V(1).Info("Warning: " + fmt.Sprintf(format, args...))
}

func (l toolkitLogger) Tracef(format string, args ...any) {
	l.logger.V(6).Info(fmt.Sprintf(format, args...))
}
