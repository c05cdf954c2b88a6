// Package flags gives every command-line flag of the vgpu-dra binaries an
// environment-variable mirror, the way Kubernetes components and DRA drivers
// are usually configured from a DaemonSet or Deployment: a flag given on the
// command line wins, otherwise the environment variable, otherwise the default.
// It also holds the flag types both binaries share (Kubernetes quantities).
package flags
