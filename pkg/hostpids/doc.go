// Package hostpids writes each prepared claim's host pid map, the Go half of
// the contract whose reader is vgpu-core/src/hostpids.c.
//
// libvgpu.so runs in the container's pid namespace, but NVML names
// processes by host pid; to find its own process (context memory, SM share)
// in NVML's data it needs its host pid. The Mapper runs in the plugin, in the
// host pid namespace: every interval it reads the slots of each claim's
// shared region (package region) and resolves them through /proc, checking
// the start time and that the process maps the claim's region, then replaces
// the claim's map file (claims.PreparedClaim.HostPIDsPath, mounted read-only
// into the claim's containers) when its content changed.
package hostpids
