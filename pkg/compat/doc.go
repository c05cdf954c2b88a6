// Package compat translates pods written for HAMi into DRA: container limits
// such as nvidia.com/gpu, nvidia.com/gpumem and nvidia.com/gpucores plus the
// nvidia.com/use-gputype family of annotations become ResourceClaimTemplates
// of the vgpu.dra.dev driver and a JSON patch that makes the pod reference
// them.
//
// Everything here is a pure function of the pod, the configuration and the
// GPU products published in ResourceSlices; creating the templates and
// admitting the patch is left to the webhook. Templates get a name derived
// from their content, so pods with the same request shape share one
// template and translating the same pod twice gives the same result.
package compat
