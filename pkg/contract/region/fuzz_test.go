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
	"path/filepath"
	"testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

// FuzzRead writes arbitrary bytes, padded or cut to the region size, over a
// valid region's header and first records into a region file and reads it
// as the plugin does: reading must never panic, and whatever it accepts
// must respect the documented bounds.
func FuzzRead(f *testing.F) {
	valid := fixtureBytes(f)
	f.Add(valid[:SlotsOffset+SlotSize])
	f.Add(make([]byte, 64))
	b := make([]byte, Size)
	path := filepath.Join(f.TempDir(), "region")
	reader := NewReader()
	f.Fuzz(func(t *testing.T, prefix []byte) {
		copy(b, valid)
		copy(b, prefix)
		if err := regiontest.WriteFile(path, b); err != nil {
			t.Fatal(err)
		}
		r, err := reader.Read(path)
		if err != nil {
			if r != nil {
				t.Fatalf("error %v with a region", err)
			}
			return
		}
		if r.State != StateReady && (len(r.Devices) > 0 || len(r.Processes) > 0) {
			t.Fatalf("state %v with content", r.State)
		}
		if len(r.Devices) > MaxDevices {
			t.Fatalf("%d devices", len(r.Devices))
		}
		for _, d := range r.Devices {
			if d.UUID == "" || d.SMLimitPercent > 100 || d.SMUtilPercent > 100 || d.PeakBytes < d.UsedBytes {
				t.Fatalf("unclamped device %+v", d)
			}
		}
		for _, p := range r.Processes {
			if p.PID == 0 || len(p.Devices) != len(r.Devices) {
				t.Fatalf("bad process %+v", p)
			}
			for _, u := range p.Devices {
				if u.SMUtilPercent > 100 || u.PeakBytes < u.UsedBytes {
					t.Fatalf("unclamped usage %+v", u)
				}
			}
		}
	})
}
