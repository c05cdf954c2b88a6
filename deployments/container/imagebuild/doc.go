// Command imagebuild builds the vgpu-dra driver image from build outputs
// without a container engine: it writes a `docker save` tar that
// `ctr -n k8s.io images import` or `docker load` read, and/or the image's
// root filesystem as a directory, which the Dockerfile copies into a scratch
// image so that both builds hold the same files. deployments/build-image.sh
// is the usual way to run it.
package main
