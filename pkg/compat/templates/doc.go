// Package templates manages the lifecycle of the ResourceClaimTemplates that
// HAMi translation generates.
//
// A template cannot be owned by the pod that uses it: the webhook creates it
// before the pod exists, and pods with the same request shape share one
// content-named template. Instead the webhook stamps a template with the
// time it was last used (Ensure), and the leader's garbage collector deletes
// a template once no live pod references it and it has not been used for a
// grace period. The claims made from a template are owned by their pods as
// usual, so they never outlive them.
package templates
