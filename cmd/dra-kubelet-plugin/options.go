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
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/daemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/flags"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/monitor"
)

// GPU base edit sources (see docs/prepare.md).
const (
	gpuEditsNVCDI   = "nvcdi"
	gpuEditsCDISpec = "cdi-spec"
)

type options struct {
	nodeName string
	kube     daemon.KubeClientOptions
	podUID   string

	stateRoot     string
	cdiRoot       string
	registrarDir  string
	pluginDataDir string
	libvgpuPath   string

	nvmlLibrary          string
	gpuEdits             string
	nvidiaDriverRoot     string
	nvidiaHostDriverRoot string
	nvidiaDevRoot        string
	nvidiaCDIHookPath    string
	vendorCDIKind        string
	vendorCDIDirs        []string

	memoryStep resource.Quantity
	memoryMin  resource.Quantity
	sysfsRoot  string
	procRoot   string
	// partitionableDevices: the cluster has DRAPartitionableDevices, so a
	// GPU in MIG mode is published with counters and its MIG devices.
	partitionableDevices bool
	// mps: the plugin publishes MPS devices and prepare realises them
	// (docs/mps.md); mpsControl is the
	// control program, "" for the one under the driver root.
	mps        bool
	mpsControl string
	// mpsHost runs the mps-host pod's server instead of the plugin;
	// mpsHostSocket is its socket, through which the plugin then starts
	// the daemons ("": the plugin starts them itself).
	mpsHost       bool
	mpsHostSocket string

	deviceHealth  bool
	deviceTaints  bool
	ignoredXIDs   []uint
	noExecuteXIDs []uint

	httpAddress   string
	probeTimeout  time.Duration
	shutdownGrace time.Duration

	monitorInterval     time.Duration
	claimStatusInterval time.Duration
	hostPIDInterval     time.Duration
}

func newOptions() *options {
	return &options{
		kube:                 daemon.KubeClientOptions{QPS: 5, Burst: 10, Component: "dra-kubelet-plugin"},
		stateRoot:            "/var/lib/vgpu-dra",
		cdiRoot:              "/var/run/cdi",
		registrarDir:         kubeletplugin.KubeletRegistryDir,
		pluginDataDir:        kubeletplugin.KubeletPluginsDir + "/" + names.DriverName,
		libvgpuPath:          "/usr/local/vgpu/libvgpu.so",
		gpuEdits:             gpuEditsNVCDI,
		nvidiaDriverRoot:     "/",
		vendorCDIDirs:        []string{"/etc/cdi", "/var/run/cdi"},
		nvidiaCDIHookPath:    "/usr/bin/nvidia-cdi-hook",
		vendorCDIKind:        "nvidia.com/gpu",
		memoryStep:           resource.MustParse("1Mi"),
		memoryMin:            resource.MustParse("256Mi"),
		sysfsRoot:            "/sys",
		procRoot:             "/proc",
		partitionableDevices: true,
		deviceHealth:         true,
		deviceTaints:         true,
		noExecuteXIDs:        toUints(devices.DefaultNoExecuteXIDs()),
		httpAddress:          ":8080",
		probeTimeout:         5 * time.Second,
		shutdownGrace:        10 * time.Second,

		monitorInterval:     monitor.DefaultInterval,
		claimStatusInterval: monitor.DefaultStatusInterval,
		hostPIDInterval:     hostpids.DefaultInterval,
	}
}

func (o *options) addFlags(named *cliflag.NamedFlagSets) {
	fs := named.FlagSet("kubernetes")
	fs.StringVar(&o.nodeName, "node-name", o.nodeName, "Name of the node this plugin runs on (required; usually from the downward API). It names the ResourceSlice pool.")
	o.kube.AddFlags(fs)
	fs.StringVar(&o.podUID, "pod-uid", o.podUID, "UID of the plugin's own pod (downward API). When set, two plugin pods can run side by side during a rolling update (kubelet >= 1.33); when empty, rolling updates with surge are off.")

	fs = named.FlagSet("paths")
	fs.StringVar(&o.stateRoot, "state-root", o.stateRoot, "Host directory for per-claim limits and shared regions (claims/<uid>/, each region on its own tmpfs mounted there), the checkpoint and ld.so.preload. Must be on a shared mount (in a container: mountPropagation: Bidirectional) so that the container runtime sees the region mounts.")
	fs.StringVar(&o.cdiRoot, "cdi-root", o.cdiRoot, "Directory the container runtime reads CDI specs from; one transient spec per prepared claim is written here.")
	fs.StringVar(&o.registrarDir, "kubelet-registrar-directory-path", o.registrarDir, "The kubelet's plugin registration directory.")
	fs.StringVar(&o.pluginDataDir, "kubelet-plugin-data-directory-path", o.pluginDataDir, "Directory for the plugin's DRA gRPC socket and lock file; must be shared by all instances of the plugin on a node.")
	fs.StringVar(&o.libvgpuPath, "libvgpu-path", o.libvgpuPath, "Host path of libvgpu.so, mounted read-only into every vGPU container at /usr/local/vgpu/libvgpu.so.")

	fs = named.FlagSet("GPU")
	fs.StringVar(&o.nvmlLibrary, "nvml-library", o.nvmlLibrary, "Path of libnvidia-ml.so.1 to load. Empty searches the dynamic linker's paths (and LD_LIBRARY_PATH).")
	fs.StringVar(&o.gpuEdits, "gpu-edits", o.gpuEdits, "Where a GPU's device nodes and driver libraries for containers come from: \"nvcdi\" generates them with NVIDIA Container Toolkit's library from the driver root; \"cdi-spec\" takes them from an existing vendor CDI spec (e.g. written by 'nvidia-ctk cdi generate').")
	fs.StringVar(&o.nvidiaDriverRoot, "nvidia-driver-root", o.nvidiaDriverRoot, "Root of the NVIDIA driver installation on the host (gpu-edits=nvcdi).")
	fs.StringVar(&o.nvidiaHostDriverRoot, "nvidia-host-driver-root", o.nvidiaHostDriverRoot, "The driver root as the container runtime on the host sees it, when the plugin sees it elsewhere (e.g. mounted at /driver-root in its pod). Empty means --nvidia-driver-root (gpu-edits=nvcdi).")
	fs.StringVar(&o.nvidiaDevRoot, "nvidia-dev-root", o.nvidiaDevRoot, "Root under which the NVIDIA device nodes are found. Empty means --nvidia-driver-root (gpu-edits=nvcdi).")
	fs.StringVar(&o.nvidiaCDIHookPath, "nvidia-cdi-hook-path", o.nvidiaCDIHookPath, "Host path of nvidia-cdi-hook used in generated hooks (gpu-edits=nvcdi).")
	fs.StringVar(&o.vendorCDIKind, "vendor-cdi-kind", o.vendorCDIKind, "CDI kind of the vendor spec whose devices are named by GPU UUID (gpu-edits=cdi-spec).")
	fs.StringSliceVar(&o.vendorCDIDirs, "vendor-cdi-dirs", o.vendorCDIDirs, "Directories searched for the vendor CDI spec (gpu-edits=cdi-spec).")
	flags.QuantityVar(fs, &o.memoryStep, "memory-step", "Granularity of the published memory capacity: requests round up to a multiple of it.")
	flags.QuantityVar(fs, &o.memoryMin, "memory-min", "Smallest memory a claim can get on one GPU: smaller requests round up to it.")
	fs.StringVar(&o.sysfsRoot, "sysfs-root", o.sysfsRoot, "Where the host's sysfs is mounted; used to publish each GPU's PCIe root (resource.kubernetes.io/pcieRoot) for topology-aware placement.")
	fs.StringVar(&o.procRoot, "proc-root", o.procRoot, "Where the host's procfs is mounted for the NVIDIA driver's files: the device nodes of a MIG instance are read from its driver/nvidia/capabilities. Processes are read from the plugin's own /proc, the host's since the plugin runs with hostPID.")
	fs.BoolVar(&o.partitionableDevices, "partitionable-devices", o.partitionableDevices, "Publish each GPU in MIG mode as a counter set with its MIG devices (one per profile and placement), which the scheduler keeps from overlapping; needs the DRAPartitionableDevices feature (beta, on by default in Kubernetes 1.37). When false, when the API server drops the counters, or on a cluster older than Kubernetes 1.36.2 (whose scheduler stops counting an allocated shareable device's counters, kubernetes/kubernetes#139034), a GPU in MIG mode is published as its whole-GPU device only (plus an admin's fixed instances).")
	fs.BoolVar(&o.mps, "mps", o.mps, "Publish an MPS device (gpu-<index>-mps, docs/mps.md) beside each GPU not in MIG mode, with a counter set that lets one GPU serve time-sliced or MPS claims but not both at once (needs --partitionable-devices and DRAPartitionableDevices: without them no MPS device is published), and prepare its claims: the first claim on a GPU starts its nvidia-cuda-mps-control daemon, the last one's unprepare stops it; while claims use it, a daemon that dies is restarted with backoff. Without --mps-host-socket the daemon runs in the plugin's container and ends with it (a restarted plugin starts it again).")
	fs.StringVar(&o.mpsControl, "mps-control", o.mpsControl, "Path of nvidia-cuda-mps-control (--mps, --mps-host). Empty means usr/bin/nvidia-cuda-mps-control under --nvidia-driver-root.")
	fs.StringVar(&o.mpsHostSocket, "mps-host-socket", o.mpsHostSocket, "Unix socket of the node's mps-host pod (--mps): the plugin has it start the MPS control daemons, so that they outlive a restart of the plugin's container or a replacement of its pod and are adopted. Empty: the plugin starts them itself, in its own container.")
	fs.BoolVar(&o.mpsHost, "mps-host", o.mpsHost, "Run as the mps-host pod's server instead of the plugin: serve --mps-host-socket, start the control program (--mps-control) there for the plugin and reap the daemons it leaves. Reads --state-root, --mps-control and --nvidia-driver-root; no other flag applies.")
	fs.BoolVar(&o.deviceHealth, "device-health", o.deviceHealth, "Report device health to the kubelet from NVML XID events. When false the health service is not offered.")
	fs.UintSliceVar(&o.ignoredXIDs, "ignored-xids", o.ignoredXIDs, "Additional XID error codes that do not mark a GPU unhealthy (application errors are ignored already).")
	fs.BoolVar(&o.deviceTaints, "device-taints", o.deviceTaints, "Taint a GPU in the ResourceSlice (key "+names.TaintKeyXID+", value the XID) when NVML reports a critical XID on it (needs --device-health). The taint is lifted when a restarted plugin finds the GPU healthy.")
	fs.UintSliceVar(&o.noExecuteXIDs, "noexecute-xids", o.noExecuteXIDs, "XIDs whose taint has effect NoExecute (pods using the GPU are evicted); every other reported XID gets NoSchedule (running pods stay, new claims go elsewhere). The default lists the XIDs after which NVIDIA asks for a GPU reset.")

	fs = named.FlagSet("serving")
	fs.StringVar(&o.httpAddress, "http-address", o.httpAddress, "Address for /metrics (Prometheus) and /healthz (checks the plugin's gRPC sockets). Empty disables it.")
	fs.DurationVar(&o.probeTimeout, "healthz-timeout", o.probeTimeout, "Time limit for one /healthz check of the gRPC sockets.")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", o.shutdownGrace, "Time allowed for in-flight requests after SIGTERM.")

	fs = named.FlagSet("monitor")
	fs.DurationVar(&o.monitorInterval, "monitor-interval", o.monitorInterval, "Shortest time between two reads of the claims' shared regions and NVML; scrapes in between get the last values. Set it to the Prometheus scrape interval or less.")
	fs.DurationVar(&o.hostPIDInterval, "host-pid-interval", o.hostPIDInterval, "How often each claim's host pid map (claims/<uid>/host/pids: the host pids of the processes in its shared region) is brought up to date. libvgpu.so in a container needs it to match NVML's per-process data for the compute limiter and the context overhead rule; a new process waits up to this long plus a second. The plugin must run in the host pid namespace (hostPID).")
	fs.DurationVar(&o.claimStatusInterval, "claim-status-interval", o.claimStatusInterval, "Longest time a changed usage waits before it is written to the ResourceClaim's status.devices (large changes go sooner, at most every sixth of it). Negative turns status writing off.")
}

func (o *options) validate() error {
	if o.mpsHost {
		if o.mpsHostSocket == "" {
			return errors.New("--mps-host-socket: required with --mps-host")
		}
		return nil
	}
	var errs []error
	if o.nodeName == "" {
		errs = append(errs, errors.New("--node-name (or $NODE_NAME) is required"))
	}
	switch o.gpuEdits {
	case gpuEditsNVCDI, gpuEditsCDISpec:
	default:
		errs = append(errs, fmt.Errorf("--gpu-edits: %q is not one of %q, %q", o.gpuEdits, gpuEditsNVCDI, gpuEditsCDISpec))
	}
	if o.memoryStep.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("--memory-step: must be positive, got %s", o.memoryStep.String()))
	}
	if o.memoryMin.Sign() < 0 {
		errs = append(errs, fmt.Errorf("--memory-min: must not be negative, got %s", o.memoryMin.String()))
	}
	if o.monitorInterval <= 0 {
		errs = append(errs, fmt.Errorf("--monitor-interval: must be positive, got %s", o.monitorInterval))
	}
	if o.hostPIDInterval <= 0 {
		errs = append(errs, fmt.Errorf("--host-pid-interval: must be positive, got %s", o.hostPIDInterval))
	}
	if o.claimStatusInterval == 0 {
		errs = append(errs, errors.New("--claim-status-interval: must not be zero (negative turns status writing off)"))
	}
	for _, dir := range []struct{ flag, value string }{
		{"state-root", o.stateRoot}, {"cdi-root", o.cdiRoot},
		{"kubelet-registrar-directory-path", o.registrarDir},
		{"kubelet-plugin-data-directory-path", o.pluginDataDir},
	} {
		if dir.value == "" {
			errs = append(errs, fmt.Errorf("--%s: must not be empty", dir.flag))
		}
	}
	return errors.Join(errs...)
}

func toUints(v []uint64) []uint {
	out := make([]uint, len(v))
	for i, x := range v {
		out[i] = uint(x)
	}
	return out
}

// noExecuteXIDList is --noexecute-xids as the taint policy takes it.
func (o *options) noExecuteXIDList() []uint64 {
	out := make([]uint64, len(o.noExecuteXIDs))
	for i, x := range o.noExecuteXIDs {
		out[i] = uint64(x)
	}
	return out
}
