// Package quota limits the GPU memory and cores that the ResourceClaims of
// one namespace may request from the vgpu.dra.dev driver. Kubernetes'
// ResourceQuota counts devices only, not consumed capacity, so a shared GPU
// slice of 1Gi and a whole 80Gi GPU would count the same.
//
// An administrator sets the limits as annotations on the Namespace
// (AnnotationMemory, AnnotationCores). The admission webhook charges every
// new claim against them through a per-namespace ledger ConfigMap that is
// updated with optimistic concurrency (resourceVersion preconditions), so
// concurrent creates on any number of webhook replicas can never together
// exceed a limit. docs/controller.md explains the rules.
package quota
