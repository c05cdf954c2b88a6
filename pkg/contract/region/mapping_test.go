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

package region

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMappingReadsWhatTheFileHolds(t *testing.T) {
	path := writeRegion(t, fixtureBytes(t))
	m, err := Map(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	assert.Equal(t, path, m.Path())

	r := NewReader()
	want, err := r.Read(path)
	require.NoError(t, err)
	got, err := r.ReadMapping(m)
	require.NoError(t, err)
	assertRegion(t, want, got)

	// Writes through the file show in the mapping: it is shared, not a copy.
	b := fixtureBytes(t)
	binary.LittleEndian.PutUint64(b[SlotsOffset+offSlotDevices+offSDKernelLaunches:], 4242)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b[SlotsOffset:SlotsOffset+SlotSize], SlotsOffset)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err = r.ReadMapping(m)
	require.NoError(t, err)
	require.NotEmpty(t, got.Processes)
	assert.Equal(t, uint64(4242), got.Processes[0].Devices[0].KernelLaunches)
}

func TestMappingOfAFileThatChanges(t *testing.T) {
	t.Run("removed", func(t *testing.T) {
		path := writeRegion(t, fixtureBytes(t))
		m, err := Map(path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		require.NoError(t, os.Remove(path))
		_, err = NewReader().ReadMapping(m)
		assert.ErrorIs(t, err, ErrRemoved)
	})
	t.Run("truncated", func(t *testing.T) {
		path := writeRegion(t, fixtureBytes(t))
		m, err := Map(path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		require.NoError(t, os.Truncate(path, 100))
		_, err = NewReader().ReadMapping(m)
		assert.ErrorIs(t, err, ErrCorrupt)
		// Truncated after the size check: the copy faults on a page the
		// file no longer has, and the fault is an error, not a crash.
		_, err = NewReader().readMapped(m)
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), "shrank")
	})
	t.Run("not a region", func(t *testing.T) {
		path := writeRegion(t, fixtureBytes(t)[:Size-1])
		_, err := Map(path)
		assert.ErrorIs(t, err, ErrCorrupt)
	})
}

// A slot whose owner never finishes its update (odd sequence) is reported
// as unstable, not taken as free, whatever the reader's buffer held before.
func TestMappingCountsASlotCaughtMidUpdate(t *testing.T) {
	b := fixtureBytes(t)
	binary.LittleEndian.PutUint32(b[SlotsOffset+offSlotSeq:], 3)
	m, err := Map(writeRegion(t, b))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })

	reg, err := NewReader().ReadMapping(m)
	require.NoError(t, err)
	assert.Equal(t, 1, reg.Unstable)
	for _, p := range reg.Processes {
		assert.NotEqual(t, 0, p.Slot, "the slot caught mid-update is not reported")
	}
}
