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
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/daemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/version"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstnode"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/claimcdi"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/gpuhealth"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/monitor"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpshost"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsusernode"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/publish"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/reclaim"
)

// run starts the plugin and blocks until ctx is cancelled or a fatal error
// stops it. Order matters: GPUs are discovered and the checkpoint recovered
// before the kubelet can call us, and ResourceSlices are published only once
// the plugin can prepare what gets allocated from them.
func run(ctx context.Context, o *options) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "version", version.Version, "node", o.nodeName, "stateRoot", o.stateRoot, "cdiRoot", o.cdiRoot, "gpuEdits", o.gpuEdits)

	// One NVML library for discovery, health and nvcdi: go-nvml reference
	// counts init/shutdown on it.
	nvmlLib := discovery.NewNVML(discovery.WithLibraryPath(o.nvmlLibrary))
	discoverer := discovery.NewDiscoverer(discovery.WithNVML(nvmlLib))
	infos, err := discoverer.Devices(ctx)
	if err != nil {
		return fmt.Errorf("discover GPUs: %w", err)
	}
	mig, err := publish.DiscoverMIG(ctx, discoverer, infos)
	if err != nil {
		return err
	}
	devOpts := devices.Options{MemoryStep: o.memoryStep.Value(), MemoryMin: o.memoryMin.Value(), SysfsRoot: o.sysfsRoot}
	if err := devOpts.Validate(); err != nil {
		return fmt.Errorf("device options: %w", err)
	}
	byName := make(map[string]discovery.Info, len(infos))
	for _, info := range infos {
		name := devices.Name(info.Index)
		byName[name] = info
		logger.Info("Found GPU", "device", name, "uuid", info.UUID, "product", info.ProductName, "memory", info.MemoryBytes)
	}

	edits, err := newGPUEditsSource(ctx, o, nvmlLib)
	if err != nil {
		return err
	}
	claimOpts := prepare.Options{
		DriverName:  names.DriverName,
		NodeName:    o.nodeName,
		StateRoot:   o.stateRoot,
		CDIRoot:     o.cdiRoot,
		LibVGPUPath: o.libvgpuPath,
		Devices:     byName,
		GPUEdits:    edits,
		ProcRoot:    o.procRoot,
	}
	// A GPU in MIG mode runs CUDA only inside instances: its devices, the
	// whole-GPU one included, are realised as instances (docs/mig.md).
	var migHealth *gpuhealth.MIGResolver
	if len(mig.Enabled) > 0 {
		claimOpts.MIGGPUs = mig.Enabled
		claimOpts.MIG = discovery.NewMIGController(discovery.WithNVML(nvmlLib))
		migHealth = &gpuhealth.MIGResolver{Lister: discovery.NewMIGController(discovery.WithNVML(nvmlLib)), GPUs: map[string]gpuhealth.MIGGPU{}}
		for name, m := range mig.Enabled {
			info := byName[name]
			migHealth.GPUs[info.UUID] = gpuhealth.MIGGPU{Index: info.Index, MIG: m}
		}
	}
	// MPS claims' processes ask on host/mps.sock whether their uid may use
	// the GPU's MPS server now (docs/mps.md, containers of different users).
	var mpsUsers *mpsusernode.Node
	if claimOpts.MPS = o.mpsOptions(); claimOpts.MPS != nil {
		logger.Info("Claims of MPS devices are prepared", "control", claimOpts.MPS.Control)
		mpsUsers = mpsusernode.New(mpsusernode.Options{})
		defer mpsUsers.Close()
		claimOpts.MPS.Users = mpsUsers
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	client, err := daemon.NewKubeClient(o.kube)
	if err != nil {
		return err
	}
	// Burstable memory: one book of burst grants per node, fed by the monitor; its hooks
	// see every prepare and unprepare. Its reclaim decisions evict pods
	// through the Eviction API (pkg/node/reclaim), off the deciding goroutine.
	var burstNode *burstnode.Node
	recorder, stopEvents := newReclaimEventRecorder(ctx, client, o.nodeName)
	defer stopEvents()
	evictor, err := reclaim.New(reclaim.Options{Client: client, Recorder: recorder, Registerer: registry,
		KillPod:   podKiller{node: o.nodeName, procRoot: hostProc}.kill,
		OnFailure: func(_ context.Context, c reclaim.ClaimRef, _ error) { burstNode.ReclaimFailed(c.UID) }})
	if err != nil {
		return err
	}
	reclaimer := newAsyncEvictor(evictor)
	burstNode, err = burstnode.New(burstnode.Options{Registry: registry, Reclaimer: reclaimer})
	if err != nil {
		return err
	}
	defer burstNode.Close()
	claimOpts.Burst = burstNode
	manager, err := prepare.NewManager(ctx, claimOpts)
	if err != nil {
		return fmt.Errorf("claim manager: %w", err)
	}
	if claimOpts.MPS != nil {
		if err := registry.Register(newMPSMetrics(o.nodeName, manager)); err != nil {
			return fmt.Errorf("register MPS metrics: %w", err)
		}
	}
	// What the publisher offers: the instances the plugin owns, then those
	// that exist, both after recovery (which may have destroyed some) and
	// before the kubelet can call: nothing creates an instance in between.
	owned := manager.OwnedMIGInstances()
	if len(mig.ByUUID) > 0 {
		if mig, err = mig.WithInstancesNow(ctx, discoverer); err != nil {
			return err
		}
	}
	// After recovery, before the kubelet can call: grants from host/burst,
	// sockets of the recovered claims.
	if err := burstNode.Start(ctx, manager.PreparedClaims()); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	if mpsUsers != nil {
		var recovered []mpsusernode.Claim
		for _, c := range manager.PreparedClaims() {
			if c.MPSUserSocketPath != "" {
				recovered = append(recovered, mpsusernode.Claim{UID: c.UID, Socket: c.MPSUserSocketPath, GPUs: c.MPSGPUs()})
			}
		}
		mpsUsers.Start(ctx, manager, recovered)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go reclaimer.run(ctx)
	d := newDriver(manager, cancel, o.nodeName, byName, registry)

	// The monitor reads the prepared claims' regions.
	mon, err := monitor.New(ctx, monitor.Options{
		DriverName:     names.DriverName,
		NodeName:       o.nodeName,
		Claims:         manager,
		GPUs:           infos,
		NVML:           nvmlLib,
		Registry:       registry,
		KubeClient:     client,
		Interval:       o.monitorInterval,
		StatusInterval: o.claimStatusInterval,
		OnCollect:      func(c monitor.Collection) { burstNode.Observe(ctx, c) },
	})
	if err != nil {
		return err
	}
	go func() {
		if err := mon.Run(ctx); err != nil {
			cancel(fmt.Errorf("usage monitor: %w", err))
		}
	}()
	pidMapper, err := hostpids.NewMapper(manager, o.hostPIDInterval)
	if err != nil {
		return err
	}
	go pidMapper.Run(ctx)
	if o.deviceHealth {
		ignored := discovery.DefaultIgnoredXIDs()
		for _, xid := range o.ignoredXIDs {
			ignored = append(ignored, uint64(xid))
		}
		d.health = &gpuhealth.Watcher{
			XIDs:         discovery.NewXIDWatcher(ignored, discovery.WithNVML(nvmlLib)),
			DeviceByUUID: d.deviceByUUID,
			MIG:          migHealth,
			Policy:       devices.TaintPolicy{NoExecute: o.noExecuteXIDList()},
			Tracker:      d.gpus,
		}
	}

	helperOpts := []kubeletplugin.Option{
		kubeletplugin.DriverName(names.DriverName),
		kubeletplugin.NodeName(o.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(o.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(o.pluginDataDir),
		kubeletplugin.HealthService(o.deviceHealth),
		// The claims manager serialises prepare and unprepare itself (a
		// mutex, and a file lock across instances in a rolling update),
		// and a prepare waiting for burst memory waits outside it: the
		// helper's serialisation would hold every other claim of the node
		// for that wait, the unprepare that frees the memory included.
		kubeletplugin.Serialize(false),
	}
	if o.podUID != "" {
		helperOpts = append(helperOpts, kubeletplugin.RollingUpdate(types.UID(o.podUID)))
	}
	helper, err := kubeletplugin.Start(ctx, d, helperOpts...)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	defer helper.Stop()

	nodeEvents, stopNodeEvents := publish.NewNodeEventRecorder(ctx, client, o.nodeName)
	defer stopNodeEvents()
	features, err := apifeatures.NewReporter(registry, nodeEvents, publish.NodeRef(o.nodeName))
	if err != nil {
		return err
	}
	publishOpts := o.publishOptions()
	if publishOpts.PartitionableDevices && !publish.CountersSafe(ctx, client.Discovery(), nodeEvents, o.nodeName) {
		publishOpts.PartitionableDevices = false
	}
	pub := publish.New(helper, features, o.nodeName, infos, mig, owned, devOpts, publishOpts)
	if err := pub.Publish(ctx, nil); err != nil {
		return err
	}
	logger.Info("Published ResourceSlice", "pool", o.nodeName, "gpus", len(infos), "gpusInMIGMode", len(mig.Enabled))
	go pub.CheckReadBack(ctx, client)
	if len(mig.Enabled) > 0 {
		go pub.WatchBlocked(ctx, manager)
	}
	if d.health != nil {
		// A publish with taints is read back too: an API server without
		// DRADeviceTaints drops them.
		publishTaints := func(ctx context.Context, taints map[string][]resourceapi.DeviceTaint) error {
			err := pub.Publish(ctx, taints)
			if err == nil && len(taints) > 0 {
				go pub.CheckReadBack(ctx, client)
			}
			return err
		}
		if !o.deviceTaints {
			publishTaints = nil
		}
		go func() {
			// Without XID events the GPUs stay healthy; the plugin keeps serving.
			if err := d.health.Run(ctx, publishTaints); err != nil {
				logger.Error(err, "GPU health watch stopped; GPUs are no longer tainted or reported unhealthy")
			}
		}()
	}

	if o.httpAddress != "" {
		probe := socketProbe{
			registrarSocket: filepath.Join(o.registrarDir, registrarSocketName(o.registrarDir, o.podUID)),
			draSocket:       filepath.Join(o.pluginDataDir, draSocketName(o.podUID)),
			timeout:         o.probeTimeout,
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
		mux.Handle("/healthz", healthzHandler(probe))
		stopHTTP, err := daemon.ServeHTTP(ctx, o.httpAddress, mux)
		if err != nil {
			return err
		}
		defer stopHTTP(o.shutdownGrace)
	}

	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// registrarSocketName and draSocketName follow the kubeletplugin helper's
// naming, so /healthz probes the sockets this instance really serves.
func registrarSocketName(registrarDir, podUID string) string {
	if podUID != "" {
		return kubeletplugin.RollingUpdateRegistrarSocketFile(registrarDir, names.DriverName, types.UID(podUID))
	}
	return names.DriverName + "-reg.sock"
}

func draSocketName(podUID string) string {
	if podUID != "" {
		return "dra-" + podUID + ".sock"
	}
	return "dra.sock"
}

func newGPUEditsSource(ctx context.Context, o *options, lib nvml.Interface) (claimcdi.GPUEditsSource, error) {
	switch o.gpuEdits {
	case gpuEditsCDISpec:
		src, err := claimcdi.NewSpecDirSource(o.vendorCDIKind, o.vendorCDIDirs)
		if err != nil {
			return nil, fmt.Errorf("--gpu-edits=cdi-spec: %w", err)
		}
		return src, nil
	default:
		src, err := claimcdi.NewNVCDISource(ctx, claimcdi.NVCDIOptions{
			DriverRoot:        o.nvidiaDriverRoot,
			HostDriverRoot:    o.nvidiaHostDriverRoot,
			DevRoot:           o.nvidiaDevRoot,
			NVIDIACDIHookPath: o.nvidiaCDIHookPath,
			NVML:              lib,
		})
		if err != nil {
			return nil, fmt.Errorf("--gpu-edits=nvcdi: %w", err)
		}
		return src, nil
	}
}

// publishOptions say which devices the node publishes: with
// --partitionable-devices the counter sets of GPUs in MIG mode and their
// MIG devices, and with --mps as well each other GPU's MPS device and the
// counter set that keeps it apart from the GPU's whole-GPU device.
func (o *options) publishOptions() devices.MIGOptions {
	return devices.MIGOptions{PartitionableDevices: o.partitionableDevices, MPS: o.mps}
}

// mpsOptions is how prepare runs the MPS control daemons, nil without
// --mps (no MPS device resolves). The program is --mps-control, or the
// driver's own under the driver root; it runs with the plugin's
// environment.
func (o *options) mpsOptions() *prepare.MPSOptions {
	if !o.mps {
		return nil
	}
	opts := &prepare.MPSOptions{Control: o.mpsControlPath(), Env: os.Environ()}
	if o.mpsHostSocket != "" {
		opts.Runner = mpshost.Runner{Socket: o.mpsHostSocket}
	}
	return opts
}

// mpsControlPath is --mps-control, or the driver's own under the driver
// root; the plugin and the mps-host pod agree on it.
func (o *options) mpsControlPath() string {
	if o.mpsControl != "" {
		return o.mpsControl
	}
	return filepath.Join(o.nvidiaDriverRoot, "usr", "bin", "nvidia-cuda-mps-control")
}

// runMPSHost is the mps-host pod's server (--mps-host): it serves the
// plugin's requests to run the control program until ctx ends.
func runMPSHost(ctx context.Context, o *options) error {
	srv := &mpshost.Server{
		Socket:  o.mpsHostSocket,
		Control: o.mpsControlPath(),
		Dir:     prepare.MPSDir(o.stateRoot),
		Env:     os.Environ(),
		Reap:    true,
	}
	return srv.Serve(ctx)
}
