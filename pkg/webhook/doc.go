// Package webhook serves the admission webhooks of the dra-controller:
//
//   - a validating webhook for ResourceClaims and ResourceClaimTemplates
//     that checks this driver's opaque config and capacity requests, keeps
//     admin-only DeviceClasses in admin namespaces and charges the GPU quota
//     (ClaimValidator);
//   - a mutating webhook for Pods that turns HAMi-style GPU requests into
//     DRA claims (PodMutator);
//
// over HTTPS whose certificate is reloaded from disk when it changes
// (CertReloader), so a rotated Secret needs no restart.
package webhook
