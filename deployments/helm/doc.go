// Package chart holds the tests of the vgpu-dra-driver Helm chart in
// vgpu-dra-driver/: `helm lint` and `helm template` through Helm's own Go
// packages (no helm binary needed), rendered with the values files under
// examples/ and testdata/ and checked object by object, including the CEL
// of the admission policy evaluated against sample requests, the
// controller's generated serving certificate verified against the webhooks'
// caBundle, and upgrades rendered against a fake API server so that the
// templates' lookup of the existing TLS Secret is exercised.
package chart
