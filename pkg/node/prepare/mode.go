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

package prepare

import (
	"context"
	"errors"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// modeName names a sharing mode; a limit names its own with
// GPULimit.mode, "" for a plain software slice.
type modeName string

// sharingMode is one way of realising a claim's limit on a GPU beyond the
// software slice every claim gets (docs/prepare.md, sharing modes): what
// the mode plans, realises, adds to the CDI edits, checkpoints, recovers
// and releases. Prepare calls a mode only for the limits that name it, so
// a plain software slice calls none. The mode's checkpoint section is its
// checkpointSection, which decoding needs before any Manager exists.
//
// Every method runs with the manager's lock held and m.cp current.
type sharingMode interface {
	// resolve returns what device name offers a claim when the device is
	// the mode's: the GPU's Info narrowed to what the mode realises, and
	// the limit a claim's shares of it add up in (UUID and the mode's
	// reference set, nothing else).
	resolve(name string) (discovery.Info, GPULimit, bool)
	// limitKey tells apart the limits of one GPU the mode realises
	// separately; it is appended to the GPU's UUID.
	limitKey(g GPULimit) string
	// order sorts the mode's limits of one GPU after the GPU's own.
	order(g GPULimit) int
	// burstable reports whether a limit of the mode may burst into the
	// GPU's unbooked memory.
	burstable() bool
	// planned clears in g what realise fills in, so that a claim prepared
	// again compares equal to its plan.
	planned(g *GPULimit)
	// reserve records in the checkpoint (in memory; the caller saves it)
	// that claim c uses what the mode realises, before anything exists.
	reserve(c *PreparedClaim)
	// realise creates what c's limits of the mode need and do not have,
	// checkpointing each step, and fills in their references. It reports
	// whether a reference changed (the config and CDI spec then change).
	realise(ctx context.Context, c *PreparedClaim) (bool, error)
	// deviceEdits returns the container edits of limit g, which replace
	// the GPU's own device edits (gpu); a mode that only adds to them
	// returns gpu with its additions.
	deviceEdits(g GPULimit, gpu cdispec.ContainerEdits) (cdispec.ContainerEdits, error)
	// release drops claim uid from the mode's records (in memory; the
	// caller saves them) and reports whether any changed. complete says
	// that the records are all this process's, with no crash between a
	// step and its record, so that what was never realised can go at once.
	release(uid types.UID, complete bool) bool
	// teardown, after the checkpoint without the released claims is
	// saved, removes what no claim uses any more (uid: the claim whose
	// release led here, "" for what earlier calls left).
	teardown(ctx context.Context, uid types.UID) error
	// recover runs at start, after incomplete prepares were rolled back:
	// it compares the mode's records with the node and repairs both.
	recover(ctx context.Context)
}

// modeOf returns the mode that realises limit g, nil for a plain software
// slice.
func (m *Manager) modeOf(g GPULimit) sharingMode {
	if name := g.mode(); name != "" {
		return m.modes[name]
	}
	return nil
}

// modesOf returns the modes that realise some limit of c, each once, in
// the order of c's limits.
func (m *Manager) modesOf(c *PreparedClaim) []sharingMode {
	var out []sharingMode
	seen := map[modeName]bool{}
	for _, g := range c.GPUs {
		name := g.mode()
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, m.modes[name])
	}
	return out
}

// resolve returns what a published device offers a claim: a GPU's Info
// and a plain limit, or what a mode with devices on this node resolves it
// to.
func (m *Manager) resolve(name string) (discovery.Info, GPULimit, bool) {
	for _, mode := range m.deviceModes {
		if info, g, ok := mode.resolve(name); ok {
			return info, g, true
		}
	}
	info, ok := m.opts.Devices[name]
	return info, GPULimit{UUID: info.UUID}, ok
}

// limitKey tells the GPU limits of one claim apart: one per GPU, or one
// per unit a mode realises separately on it.
func (m *Manager) limitKey(g GPULimit) string {
	if mode := m.modeOf(g); mode != nil {
		return g.UUID + "/" + string(g.mode()) + "/" + mode.limitKey(g)
	}
	return g.UUID
}

// limitOrder sorts the limits of one GPU: the GPU's own first.
func (m *Manager) limitOrder(g GPULimit) int {
	if mode := m.modeOf(g); mode != nil {
		return mode.order(g)
	}
	return -1
}

// burstable reports whether limit g may burst into the GPU's unbooked
// memory.
func (m *Manager) burstable(g GPULimit) bool {
	mode := m.modeOf(g)
	return mode == nil || mode.burstable()
}

// planned returns a copy of c as plan produces it: without what the modes
// fill in when they realise its limits.
func (m *Manager) planned(c *PreparedClaim) PreparedClaim {
	out := c.deepCopy()
	for i := range out.GPUs {
		if mode := m.modeOf(out.GPUs[i]); mode != nil {
			mode.planned(&out.GPUs[i])
		}
	}
	return out
}

// reserve records what the modes of c will realise for it.
func (m *Manager) reserve(c *PreparedClaim) {
	for _, mode := range m.modesOf(c) {
		mode.reserve(c)
	}
}

// realise has the modes of c realise its limits; it reports whether a
// reference changed.
func (m *Manager) realise(ctx context.Context, c *PreparedClaim) (bool, error) {
	changed := false
	for _, mode := range m.modesOf(c) {
		ch, err := mode.realise(ctx, c)
		changed = changed || ch
		if err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// release drops claim c from the records of its modes and returns the
// modes whose records changed.
func (m *Manager) release(c *PreparedClaim, complete bool) []sharingMode {
	var changed []sharingMode
	for _, mode := range m.modesOf(c) {
		if mode.release(c.UID, complete) {
			changed = append(changed, mode)
		}
	}
	return changed
}

// teardown has the given modes remove what no claim uses any more.
func teardown(ctx context.Context, modes []sharingMode, uid types.UID) error {
	var errs []error
	for _, mode := range modes {
		errs = append(errs, mode.teardown(ctx, uid))
	}
	return errors.Join(errs...)
}

// allModes returns every mode, in a fixed order.
func (m *Manager) allModes() []sharingMode {
	out := make([]sharingMode, 0, len(m.modes))
	for _, name := range sortedKeys(m.modes) {
		out = append(out, m.modes[name])
	}
	return out
}

// infoByUUID finds the GPU with the given UUID.
func (m *Manager) infoByUUID(uuid string) (discovery.Info, bool) {
	for _, info := range m.opts.Devices {
		if info.UUID == uuid {
			return info, true
		}
	}
	return discovery.Info{}, false
}

// sortedKeys returns m's keys in order, so that the checkpoint's sections
// are walked the same way at every run.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
