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

package allocator

import (
	"context"
)

// DryRun is Allocate without its side effect: it answers whether and where
// the request's claims would go given the slices and allocations the
// Allocator holds, and forgets the decision again. kubectl vgpu why uses it
// to ask the same question the controller and the scheduler ask, per node
// and per GPU, without writing anything.
//
// The request's claims must not be allocated already (their UIDs are
// forgotten afterwards).
func (a *Allocator) DryRun(ctx context.Context, req Request) (*Decision, error) {
	d, err := a.Allocate(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, claim := range req.Claims {
		a.Forget(claim.UID)
	}
	return d, nil
}
