// Package gputest provides go-nvml's DGX H200 mock server with the calls
// filled in that pkg/gpu needs and the mock leaves unset (PCI bus id, NUMA
// node, device attributes, XID event registration). It serves the tests of
// pkg/gpu and of the components built on it, and is imported by tests only.
// EnableMIG adds the MIG create/destroy calls and error codes the mock lacks.
package gputest
