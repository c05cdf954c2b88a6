// Command vgpu-install is the init container of the kubelet plugin's
// DaemonSet: it installs libvgpu.so from the image onto the host, where the
// plugin's CDI specs mount it into vGPU containers. See package hostinstall
// for how the switch stays atomic for containers that start meanwhile.
package main
