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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/admission"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/daemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/flags"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

type options struct {
	kube         daemon.KubeClientOptions
	podName      string
	podNamespace string

	leaderElect   bool
	leaseName     string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration

	webhookAddress    string
	tlsCertFile       string
	tlsKeyFile        string
	tlsReloadInterval time.Duration

	deviceClasses    []string
	adminOnlyClasses []string
	adminNamespaces  []string
	maxMemory        resource.Quantity
	quotaGrace       time.Duration

	hamiAllNamespaces   bool
	hamiDeviceClass     string
	hamiMIGDeviceClass  string
	hamiMPSDeviceClass  string
	hamiCount           string
	hamiMemory          string
	hamiMemoryPercent   string
	hamiCores           string
	hamiPriority        string
	templateGrace       time.Duration
	templateTouch       time.Duration
	garbageCollectEvery time.Duration

	policyAllocation  string
	defaultNodePolicy string
	defaultGPUPolicy  string
	fallbackAfter     time.Duration
	policyWorkers     int

	httpAddress   string
	profiling     bool
	shutdownGrace time.Duration
}

func newOptions() *options {
	return &options{
		// The policy allocator writes three times per pod (claim finalizer,
		// claim allocation, pod gate) plus an event; 100 QPS keeps up with
		// kube-scheduler's binding rate (docs/scale.md).
		kube:                daemon.KubeClientOptions{QPS: 100, Burst: 200, Component: "dra-controller"},
		leaderElect:         true,
		leaseName:           "vgpu-dra-controller",
		leaseDuration:       15 * time.Second,
		renewDeadline:       10 * time.Second,
		retryPeriod:         2 * time.Second,
		webhookAddress:      ":8443",
		tlsCertFile:         "/etc/vgpu-dra/tls/tls.crt",
		tlsKeyFile:          "/etc/vgpu-dra/tls/tls.key",
		tlsReloadInterval:   10 * time.Second,
		deviceClasses:       names.DeviceClasses(),
		adminOnlyClasses:    []string{names.DeviceClassUnenforced},
		adminNamespaces:     []string{"kube-system"},
		maxMemory:           resource.MustParse("1Ti"),
		quotaGrace:          time.Minute,
		hamiDeviceClass:     names.DeviceClass,
		hamiMIGDeviceClass:  names.MIGDeviceClass,
		hamiMPSDeviceClass:  names.MPSDeviceClass,
		hamiCount:           string(hami.DefaultCountResource),
		hamiMemory:          string(hami.DefaultMemoryResource),
		hamiMemoryPercent:   string(hami.DefaultMemoryPercentageResource),
		hamiCores:           string(hami.DefaultCoresResource),
		hamiPriority:        string(hami.DefaultPriorityResource),
		templateGrace:       10 * time.Minute,
		templateTouch:       time.Minute,
		garbageCollectEvery: time.Minute,
		policyAllocation:    string(admission.PolicyAllocationNamespace),
		defaultNodePolicy:   string(allocator.Binpack),
		defaultGPUPolicy:    string(allocator.Spread),
		fallbackAfter:       30 * time.Second,
		policyWorkers:       allocator.DefaultWorkers,
		httpAddress:         ":8080",
		shutdownGrace:       10 * time.Second,
	}
}

func (o *options) addFlags(named *cliflag.NamedFlagSets) {
	fs := named.FlagSet("kubernetes")
	o.kube.AddFlags(fs)
	fs.StringVar(&o.podName, "pod-name", o.podName, "Name of the controller's pod (downward API); identifies this replica in leader election. Empty uses the host name.")
	fs.StringVar(&o.podNamespace, "pod-namespace", o.podNamespace, "Namespace of the controller (downward API, required). Holds the leader-election Lease and the GPU quota usage records.")

	fs = named.FlagSet("leader election")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "Elect one replica for the garbage collectors. Turn off only when running a single replica.")
	fs.StringVar(&o.leaseName, "leader-elect-lease-name", o.leaseName, "Name of the Lease used for leader election.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", o.leaseDuration, "How long a leader's lease is valid without renewal.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", o.renewDeadline, "How long the leader keeps trying to renew before it gives up leadership (and exits).")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", o.retryPeriod, "Wait between attempts to acquire or renew the lease.")
	fs.DurationVar(&o.garbageCollectEvery, "garbage-collect-interval", o.garbageCollectEvery, "How often the leader looks for unused templates and quota usage records of deleted namespaces.")

	fs = named.FlagSet("webhook")
	fs.StringVar(&o.webhookAddress, "webhook-address", o.webhookAddress, "HTTPS address of the admission webhooks.")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", o.tlsCertFile, "PEM certificate (chain) of the webhook server, e.g. from a mounted Secret. Reloaded when its contents change.")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", o.tlsKeyFile, "PEM private key of the webhook certificate. Reloaded with the certificate.")
	fs.DurationVar(&o.tlsReloadInterval, "tls-reload-interval", o.tlsReloadInterval, "How often the certificate files are checked for a rotation.")

	fs = named.FlagSet("admission")
	fs.StringSliceVar(&o.deviceClasses, "device-classes", o.deviceClasses, "DeviceClasses of this driver whose requests are validated and charged to the quota. Classes whose selectors pick this driver's devices (evaluated with the scheduler's CEL library, whatever their spelling) or that carry its config are recognised as well.")
	fs.StringSliceVar(&o.adminOnlyClasses, "admin-only-device-classes", o.adminOnlyClasses, "DeviceClasses that switch limits off; claims and templates may name them only in --admin-namespaces.")
	fs.StringSliceVar(&o.adminNamespaces, "admin-namespaces", o.adminNamespaces, "Namespaces allowed to use --admin-only-device-classes.")
	flags.QuantityVar(fs, &o.maxMemory, "max-memory-per-device", "Largest memory request accepted for one GPU; anything larger is refused as a unit mistake.")
	fs.DurationVar(&o.quotaGrace, "quota-grace-period", o.quotaGrace, "How long a quota charge counts before its claim appears in the informer cache; also how long a charge of a claim that was never created (rejected later) lingers.")

	fs = named.FlagSet("HAMi compatibility")
	fs.BoolVar(&o.hamiAllNamespaces, "hami-compat-all-namespaces", o.hamiAllNamespaces, "Translate HAMi pods in every namespace. When false, only in namespaces labelled vgpu.dra.dev/hami-compat=enabled.")
	fs.StringVar(&o.hamiDeviceClass, "hami-device-class", o.hamiDeviceClass, "DeviceClass that translated requests use.")
	fs.StringVar(&o.hamiMIGDeviceClass, "hami-mig-device-class", o.hamiMIGDeviceClass, "DeviceClass that translated requests of pods annotated nvidia.com/vgpu-mode: mig use.")
	fs.StringVar(&o.hamiMPSDeviceClass, "hami-mps-device-class", o.hamiMPSDeviceClass, "DeviceClass that translated requests of pods annotated nvidia.com/vgpu-mode: mps use.")
	fs.StringVar(&o.hamiCount, "hami-resource-count", o.hamiCount, "Container resource with the number of GPUs.")
	fs.StringVar(&o.hamiMemory, "hami-resource-memory", o.hamiMemory, "Container resource with GPU memory per GPU in MiB.")
	fs.StringVar(&o.hamiMemoryPercent, "hami-resource-memory-percentage", o.hamiMemoryPercent, "Container resource with GPU memory per GPU in percent of the GPU.")
	fs.StringVar(&o.hamiCores, "hami-resource-cores", o.hamiCores, "Container resource with the percentage of SM time per GPU.")
	fs.StringVar(&o.hamiPriority, "hami-resource-priority", o.hamiPriority, "Container resource with the priority: 0 high, 1 low.")
	fs.DurationVar(&o.templateGrace, "hami-template-grace-period", o.templateGrace, "A generated ResourceClaimTemplate is deleted once no pod references it and it has not been used for this long.")
	fs.DurationVar(&o.templateTouch, "hami-template-touch-interval", o.templateTouch, "The webhook refreshes a template's last-used stamp at most this often; must be well below the grace period.")

	fs = named.FlagSet("policy allocation")
	fs.StringVar(&o.policyAllocation, "policy-allocation", o.policyAllocation, "Where new pods whose claims use --device-classes are held (scheduling gate "+allocator.SchedulingGate+") for the policy allocator: off, namespace (namespaces labelled "+admission.PolicyAllocationLabel+"="+admission.PolicyAllocationEnabled+") or cluster. The leader serves gated pods in every mode, so none waits forever after a switch to off.")
	fs.StringVar(&o.defaultNodePolicy, "default-node-policy", o.defaultNodePolicy, "Node-level placement: binpack (fullest node that fits) or spread (emptiest). Pods override it with the annotation "+allocator.NodePolicyAnnotation+".")
	fs.StringVar(&o.defaultGPUPolicy, "default-gpu-policy", o.defaultGPUPolicy, "GPU-level placement on the chosen node: binpack or spread. Pods override it with the annotation "+allocator.GPUPolicyAnnotation+".")
	fs.DurationVar(&o.fallbackAfter, "policy-fallback-delay", o.fallbackAfter, "How long kube-scheduler may report a pod unschedulable on the node its claims were allocated to before the allocation is released and the scheduler allocates them itself.")
	fs.IntVar(&o.policyWorkers, "policy-workers", o.policyWorkers, "Gated pods and released claims worked on at once by the leader. Placement decisions are still made one at a time; the API writes after each (claim finalizer, allocation, gate, event) overlap, which is what bounds the allocator's rate.")

	fs = named.FlagSet("serving")
	fs.StringVar(&o.httpAddress, "http-address", o.httpAddress, "Address for /metrics (Prometheus), /healthz and /readyz (informer caches synced). Empty disables it.")
	fs.BoolVar(&o.profiling, "profiling", o.profiling, "Serve Go's pprof profiles under /debug/pprof/ on --http-address, for finding where time goes (docs/scale.md). Off by default: profiles reveal internals and cost CPU while taken.")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", o.shutdownGrace, "Time allowed for in-flight requests after SIGTERM.")
}

func (o *options) validate() error {
	var errs []error
	if o.podNamespace == "" {
		errs = append(errs, errors.New("--pod-namespace (or $POD_NAMESPACE) is required"))
	}
	for _, f := range []struct {
		flag  string
		value string
	}{
		{"webhook-address", o.webhookAddress}, {"tls-cert-file", o.tlsCertFile}, {"tls-key-file", o.tlsKeyFile},
		{"hami-device-class", o.hamiDeviceClass}, {"hami-mig-device-class", o.hamiMIGDeviceClass}, {"hami-mps-device-class", o.hamiMPSDeviceClass}, {"leader-elect-lease-name", o.leaseName},
		{"hami-resource-count", o.hamiCount}, {"hami-resource-memory", o.hamiMemory},
		{"hami-resource-memory-percentage", o.hamiMemoryPercent}, {"hami-resource-cores", o.hamiCores},
		{"hami-resource-priority", o.hamiPriority},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("--%s: must not be empty", f.flag))
		}
	}
	for _, f := range []struct {
		flag  string
		value time.Duration
	}{
		{"tls-reload-interval", o.tlsReloadInterval}, {"quota-grace-period", o.quotaGrace},
		{"hami-template-grace-period", o.templateGrace}, {"hami-template-touch-interval", o.templateTouch},
		{"garbage-collect-interval", o.garbageCollectEvery}, {"leader-elect-lease-duration", o.leaseDuration},
		{"policy-fallback-delay", o.fallbackAfter},
		{"leader-elect-renew-deadline", o.renewDeadline}, {"leader-elect-retry-period", o.retryPeriod},
	} {
		if f.value <= 0 {
			errs = append(errs, fmt.Errorf("--%s: must be positive, got %s", f.flag, f.value))
		}
	}
	if o.policyWorkers < 1 {
		errs = append(errs, fmt.Errorf("--policy-workers: must be at least 1, got %d", o.policyWorkers))
	}
	if o.templateTouch > 0 && o.templateTouch*2 > o.templateGrace {
		errs = append(errs, fmt.Errorf("--hami-template-touch-interval (%s) must be at most half of --hami-template-grace-period (%s), or templates in use could be collected", o.templateTouch, o.templateGrace))
	}
	if o.leaderElect && o.renewDeadline >= o.leaseDuration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)", o.renewDeadline, o.leaseDuration))
	}
	if o.maxMemory.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("--max-memory-per-device: must be positive, got %s", o.maxMemory.String()))
	}
	if _, err := admission.ParsePolicyAllocationMode(o.policyAllocation); err != nil {
		errs = append(errs, fmt.Errorf("--policy-allocation: %w", err))
	}
	if _, err := allocator.ParsePolicy(o.defaultNodePolicy); err != nil {
		errs = append(errs, fmt.Errorf("--default-node-policy: %w", err))
	}
	if _, err := allocator.ParsePolicy(o.defaultGPUPolicy); err != nil {
		errs = append(errs, fmt.Errorf("--default-gpu-policy: %w", err))
	}
	if len(o.deviceClasses) == 0 {
		errs = append(errs, errors.New("--device-classes: must name at least one DeviceClass"))
	}
	return errors.Join(errs...)
}

func (o *options) resourceNames() hami.ResourceNames {
	return hami.ResourceNames{
		Count:            corev1.ResourceName(o.hamiCount),
		Memory:           corev1.ResourceName(o.hamiMemory),
		MemoryPercentage: corev1.ResourceName(o.hamiMemoryPercent),
		Cores:            corev1.ResourceName(o.hamiCores),
		Priority:         corev1.ResourceName(o.hamiPriority),
	}
}

// policies returns the validated default placement policies.
func (o *options) policies() allocator.Policies {
	return allocator.Policies{Node: allocator.Policy(o.defaultNodePolicy), GPU: allocator.Policy(o.defaultGPUPolicy)}
}
