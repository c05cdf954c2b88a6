/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
