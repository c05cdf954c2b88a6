// Command fake-gpu-cdi writes the vendor CDI spec (kind nvidia.com/gpu, one
// device per GPU, named by UUID) for the simulated GPUs of vgpu-core's fake
// NVML, as "nvidia-ctk cdi generate --device-name-strategy=uuid" does for real
// GPUs. The kubelet plugin's --gpu-edits=cdi-spec mode composes its per-claim
// specs from it, so the e2e cluster and the demo exercise the same CDI path
// as production.
//
// The GPUs are discovered through the fake libnvidia-ml.so.1 (loaded the way
// the plugin loads it), so the UUIDs are the ones the plugin publishes. Every
// container that gets a simulated GPU also gets the fake driver libraries at
// the standard library path, the fake configuration file (read-only) and the
// simulated GPU state directory, so the processes in containers and the
// plugin on the host see the same GPUs.
package main
