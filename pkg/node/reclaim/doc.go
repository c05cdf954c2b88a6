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

// Package reclaim gives burst memory back to a claim that needs its
// guarantee (docs/architecture.md, "Burstable memory", reclaim): it evicts,
// through the Eviction API, the pods of the claims the book of burst grants chose
// (pkg/node/burstgrant, Decision.Reclaim), with the class's grace period, and
// tells both sides with Events. Burst is lent, so it is revocable whatever
// the pod does: a pod whose eviction a PodDisruptionBudget refuses (429
// TooManyRequests), or that terminates with a longer grace period, is
// deleted with the class's grace period (docs/api.md, "Burst is
// revocable").
//
// The Evictor decides nothing about whom to evict and keeps no grants; it
// only evicts (or deletes), reports and retries. A failure goes to the
// caller's OnFailure callback (the plugin lets the claim grow again,
// burstgrant.Book.CancelReclaim), raises a Warning Event and is retried with
// backoff from a rate-limited work queue, one entry per claim. Pods that
// are gone or terminating within the grace period are left alone, so
// calling Reclaim again for the same claim (the kubelet retries prepare)
// evicts nothing twice.
package reclaim
