// Package version holds the build version of the vgpu-dra binaries, set by the
// linker (-X .../pkg/version.Version=...) so logs and --version tell which build
// runs on a node.
package version
