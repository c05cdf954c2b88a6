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
