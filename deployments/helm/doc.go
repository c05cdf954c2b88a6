// Package chart holds the tests of the vgpu-dra-driver Helm chart in
// vgpu-dra-driver/: `helm lint` and `helm template` through Helm's own Go
// packages (no helm binary needed), rendered with the values files under
// examples/ and testdata/ and checked object by object, including the CEL
// of the admission policy evaluated against sample requests.
package chart
