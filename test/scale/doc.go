// Package scale is the library of the scale benchmark (docs/scale.md): the
// simulated GPU nodes and the ResourceSlices their kubelet plugin would
// publish, the pods and claim templates of the workload, and the figures and
// checks computed from a run (latency percentiles, packing, capacity
// violations, process and API server counters, the report table).
//
// The control plane itself (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager, the KWOK controller, dra-controller) is started
// by test/scale/run.sh; cmd/scale-bench drives one arm of the run against it.
package scale
