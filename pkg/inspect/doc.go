// Package inspect answers the two questions operators of shared GPUs ask
// all day, from what the API server already holds (ResourceSlices,
// ResourceClaims with their allocations and the status the kubelet plugin
// writes, DeviceClasses, nodes and pods):
//
//   - who uses what on which GPU: per GPU (Nodes) and per claim (Claims),
//     capacity, what was granted and what is used;
//   - why a pod is Pending (Why): the pod's vGPU claims are put through
//     the same structured allocator the scheduler and the dra-controller
//     run (pkg/allocator, in dry run), per node and per GPU, and every
//     refusal is explained with the numbers and, where one exists, the
//     single change that makes the claim fit, itself checked with the
//     allocator.
//
// Nothing here writes to the cluster. The kubectl plugin cmd/kubectl-vgpu
// prints these results; docs/kubectl-vgpu.md describes its output.
package inspect
